//go:build linux

package cluster

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"
)

// Monitor is a client that never stops asking: from each of the client's
// addresses, to each Service it watches, an HTTP GET and a UDP exchange
// every interval, each a new flow (so the routers hash each anew), and
// every answer or failure kept with its time. A test brackets an event
// with Mark and asks Since how many requests failed from then on, and for
// how long: what a user's clients would have lost.
type Monitor struct {
	c        *Cluster
	interval time.Duration
	timeout  time.Duration

	mu      sync.Mutex
	probes  []Probe
	cancels map[string]context.CancelFunc
	targets map[string]string // name -> IP
	wg      sync.WaitGroup
}

// Probe is one request of the monitor.
type Probe struct {
	At     time.Time // when it was sent
	Target string    // the watched Service's name
	Src    string    // the client address it came from
	Proto  string    // "http" or "udp"
	Took   time.Duration
	Err    error // nil: answered
}

// Monitor starts a monitor with no target yet: each of the 16 client
// addresses asks each target over HTTP and UDP every 500 ms, a request
// failing with no answer within 2 s. (A TCP client retries a lost SYN
// after 1 s: a request whose first packet was lost but that was answered
// on the retry is a slow answer, not a lost one; a flow into a black hole
// fails. On two loaded cores an answer can take more than a second.)
// Stop it when done.
func (c *Cluster) Monitor() *Monitor {
	return &Monitor{c: c, interval: 500 * time.Millisecond, timeout: 2 * time.Second, cancels: map[string]context.CancelFunc{}, targets: map[string]string{}}
}

// Watch starts asking the Service name at ip (its ports 80 over HTTP and
// 90 over UDP, as LoadBalancerService has them).
func (m *Monitor) Watch(name, ip string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.cancels[name]; ok {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	m.cancels[name] = cancel
	m.targets[name] = ip
	srcs := ClientIPs()
	if strings.Contains(ip, ":") {
		srcs = ClientIPs6()
	}
	for i, src := range srcs {
		for _, proto := range []string{"http", "udp"} {
			m.wg.Add(1)
			go func() {
				defer m.wg.Done()
				// Spread the sources over the interval so the load is even.
				offset := m.interval * time.Duration(i) / time.Duration(len(srcs))
				select {
				case <-ctx.Done():
					return
				case <-time.After(offset):
				}
				m.ask(ctx, name, ip, src, proto)
			}()
		}
	}
}

// Unwatch stops asking name; what was recorded stays.
func (m *Monitor) Unwatch(name string) {
	m.mu.Lock()
	cancel := m.cancels[name]
	delete(m.cancels, name)
	delete(m.targets, name)
	m.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// Targets are the watched Services' addresses by name.
func (m *Monitor) Targets() map[string]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.targets)
}

// Stop ends every target's requests and waits for them.
func (m *Monitor) Stop() {
	m.mu.Lock()
	for name, cancel := range m.cancels {
		cancel()
		delete(m.cancels, name)
	}
	m.mu.Unlock()
	m.wg.Wait()
}

// ask sends one kind of request (proto "http" or "udp") from src to the
// target every interval, each on a new flow, until ctx ends. HTTP and UDP
// ask apart, so a failing one does not slow the other.
func (m *Monitor) ask(ctx context.Context, name, ip, src, proto string) {
	hc := m.c.ClientHTTP(src, m.timeout)
	url := "http://" + net.JoinHostPort(ip, "80") + "/hostname"
	udp := net.JoinHostPort(ip, "90")
	tick := time.NewTicker(m.interval)
	defer tick.Stop()
	for {
		at := time.Now()
		var err error
		if proto == "http" {
			err = httpAsk(hc, url)
		} else {
			_, err = m.c.UDPExchange(src, udp, "hostname", m.timeout)
		}
		m.record(Probe{At: at, Target: name, Src: src, Proto: proto, Took: time.Since(at), Err: err})
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// httpAsk is one GET that must answer 200 with a body (the pod's name).
func httpAsk(hc *http.Client, url string) error {
	resp, err := hc.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || len(b) == 0 {
		return fmt.Errorf("%s: %s", resp.Status, b)
	}
	return nil
}

func (m *Monitor) record(p Probe) {
	m.mu.Lock()
	m.probes = append(m.probes, p)
	m.mu.Unlock()
}

// Mark is the start of an event: a time to count from.
func (m *Monitor) Mark() time.Time { return time.Now() }

// Tally is what one target's clients saw over a window.
type Tally struct {
	Target       string
	Sent, Failed int
	// First and Last are the first and the last failed request's send
	// times (zero when none failed).
	First, Last time.Time
	// Sources is how many client addresses saw a failure; Sample one
	// failure's error.
	Sources int
	Sample  string
	// Slowest is the longest an answered request took.
	Slowest time.Duration
}

// Since tallies, per target, the requests sent from from on, sorted by
// target name.
func (m *Monitor) Since(from time.Time) []Tally {
	return m.Between(from, time.Now())
}

// Between tallies, per target, the requests sent in [from, to).
func (m *Monitor) Between(from, to time.Time) []Tally {
	m.mu.Lock()
	defer m.mu.Unlock()
	byName := map[string]*Tally{}
	srcs := map[string]map[string]bool{}
	for _, p := range m.probes {
		if p.At.Before(from) || !p.At.Before(to) {
			continue
		}
		t := byName[p.Target]
		if t == nil {
			t = &Tally{Target: p.Target}
			byName[p.Target] = t
			srcs[p.Target] = map[string]bool{}
		}
		t.Sent++
		if p.Err == nil {
			t.Slowest = max(t.Slowest, p.Took)
			continue
		}
		t.Failed++
		srcs[p.Target][p.Src] = true
		if t.First.IsZero() || p.At.Before(t.First) {
			t.First = p.At
		}
		if p.At.After(t.Last) {
			t.Last = p.At
			t.Sample = fmt.Sprintf("%s from %s: %v", p.Proto, p.Src, p.Err)
		}
	}
	var out []Tally
	for name, t := range byName {
		t.Sources = len(srcs[name])
		out = append(out, *t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Target < out[j].Target })
	return out
}

// QuietFor waits until no request to any target has failed for quiet,
// up to bound after from; it reports whether that happened.
func (m *Monitor) QuietFor(from time.Time, quiet, bound time.Duration) bool {
	for time.Since(from) < bound {
		last := from
		for _, t := range m.Since(from) {
			if t.Last.After(last) {
				last = t.Last
			}
		}
		// A request still in flight may yet fail: wait out its timeout.
		if time.Since(last) >= quiet+m.timeout {
			return true
		}
		time.Sleep(m.interval)
	}
	return false
}

// Window is one line: "web: 3 of 1920 requests failed from 2 client
// addresses, 1.2s to 4.5s after the event began (last: ...)"; from is
// the event's mark.
func (t Tally) Window(from time.Time) string {
	if t.Failed == 0 {
		return fmt.Sprintf("%s: 0 of %d requests failed (slowest answer %s)", t.Target, t.Sent, t.Slowest.Round(time.Millisecond))
	}
	return fmt.Sprintf("%s: %d of %d requests failed from %d client addresses, %s to %s after the event began (last: %s; slowest answer %s)",
		t.Target, t.Failed, t.Sent, t.Sources, t.First.Sub(from).Round(100*time.Millisecond), t.Last.Sub(from).Round(100*time.Millisecond), t.Sample, t.Slowest.Round(time.Millisecond))
}

// BlackHole is how long after from the target's clients kept failing:
// until the last failed request was sent (0 when none failed).
func (t Tally) BlackHole(from time.Time) time.Duration {
	if t.Failed == 0 {
		return 0
	}
	return t.Last.Sub(from)
}
