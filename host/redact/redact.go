// Package redact keeps credentials (the Equinix Metal API key, the BGP
// password) out of every log line the CCM writes, whatever the verbosity.
//
// Typed secrets (config.Secret, sdk.Secret) already format as "[redacted]",
// but at --v=8 and above client-go logs whole request and response bodies:
// a Secret object, a node annotation patch, a list of nodes. Those bodies are
// plain text, JSON, or a hex dump of protobuf, and carry the password in
// clear, in base64 (node annotation, Secret data) or in base64 of that. This
// package holds the set of secret values the process knows and removes every
// encoding of them from text; Install puts it between klog and its output.
//
// The set only grows: a rotated API key or a changed project password is
// added, and the old value stays hidden, since older lines may be repeated
// (retries, cached objects).
//
// Like every package under host/, it belongs to this repository alone:
// its API carries no compatibility promise to code outside it.
package redact

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
)

// marker replaces every secret.
const marker = "[redacted]"

// minLength is the shortest value redacted. Shorter values would blank out
// ordinary words; the CCM's secrets are far longer (the API validates a BGP
// password of 10 to 20 characters, and an API key has 32).
const minLength = 6

// Set is a growing set of secret values. The zero value is ready; it is
// safe for concurrent use and String never blocks on Add.
type Set struct {
	mu      sync.Mutex
	known   map[string]bool
	current atomic.Pointer[state]
}

type state struct {
	replacer *strings.Replacer
	// raw are the plain values and their whole-string encodings, searched
	// for in the bytes decoded from a hex dump.
	raw [][]byte
}

// Default is the process-wide set that Install uses.
var Default = &Set{}

// Add registers secret values; empty and too-short values are ignored.
func (s *Set) Add(values ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	changed := false
	for _, v := range values {
		if len(v) < minLength || s.known[v] {
			continue
		}
		if s.known == nil {
			s.known = map[string]bool{}
		}
		s.known[v] = true
		changed = true
	}
	if changed {
		s.rebuild()
	}
}

// Len is how many secret values the set holds.
func (s *Set) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.known)
}

func (s *Set) rebuild() {
	var needles []string
	seen := map[string]bool{}
	add := func(n string) {
		if len(n) >= minLength && !seen[n] {
			seen[n] = true
			needles = append(needles, n)
		}
	}
	st := &state{}
	for v := range s.known {
		for _, n := range encodings(v) {
			add(n)
		}
		st.raw = append(st.raw, []byte(v), []byte(base64.StdEncoding.EncodeToString([]byte(v))))
	}
	// Longest first: strings.Replacer tries the arguments in order at each
	// position, so a needle that contains another is removed whole.
	sort.Slice(needles, func(i, j int) bool {
		if len(needles[i]) != len(needles[j]) {
			return len(needles[i]) > len(needles[j])
		}
		return needles[i] < needles[j]
	})
	args := make([]string, 0, 2*len(needles))
	for _, n := range needles {
		args = append(args, n, marker)
	}
	st.replacer = strings.NewReplacer(args...)
	s.current.Store(st)
}

// encodings lists the forms in which v can reach a log line: itself; its
// base64 (standard, URL, unpadded, and the part that is the same wherever v
// starts inside a longer base64 text); the base64 of its base64 (a node
// annotation inside an encoded object); hex; and its JSON and URL escapes.
func encodings(v string) []string {
	out := []string{v}
	b64 := base64.StdEncoding.EncodeToString([]byte(v))
	out = append(out, base64Forms([]byte(v))...)
	out = append(out, base64Forms([]byte(b64))...)
	out = append(out, hex.EncodeToString([]byte(v)), strings.ToUpper(hex.EncodeToString([]byte(v))))
	if j, err := json.Marshal(v); err == nil {
		out = append(out, strings.Trim(string(j), `"`))
	}
	out = append(out, url.QueryEscape(v), url.PathEscape(v))
	return out
}

// base64Forms encodes b standalone (padded and not, standard and URL
// alphabet) and at each of the three byte offsets inside a longer text,
// keeping only the characters that depend on b alone.
func base64Forms(b []byte) []string {
	var out []string
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
		out = append(out, enc.EncodeToString(b), strings.TrimRight(enc.EncodeToString(b), "="))
		for k := 0; k < 3; k++ {
			full := enc.EncodeToString(append(make([]byte, k), b...))
			start := (8*k + 5) / 6        // the first character with no bit of the k bytes before
			end := (8 * (k + len(b))) / 6 // characters after this mix in bytes that follow
			if end > start {
				out = append(out, full[start:end])
			}
		}
	}
	return out
}

// String returns s with every known secret, in every encoding, replaced by
// marker, and any hex dump that holds a secret blanked.
func (s *Set) String(text string) string {
	st := s.current.Load()
	if st == nil || text == "" {
		return text
	}
	text = st.replacer.Replace(text)
	if strings.Contains(text, hexDumpStart) {
		text = st.hexDumps(text)
	}
	return text
}

// Contains reports whether text holds a known secret in any encoding.
func (s *Set) Contains(text string) bool { return s.String(text) != text }

// hexDumpStart is how encoding/hex's Dump begins: client-go logs a body
// with bytes below 0x0a (protobuf) that way.
const hexDumpStart = "00000000  "

// hexRow matches the offset and the hex bytes of one row of hex.Dump. In a
// JSON log line the rows are joined by a literal `\n`, so no line anchors
// are used.
var hexRow = regexp.MustCompile(`([0-9a-f]{8})  ((?:[0-9a-f]{2} {1,2}){1,16})`)

// hexDumps decodes each hex dump in text; a dump whose bytes hold a secret
// has every row (bytes and printable column) replaced by its offset and
// marker. The printable column alone cannot be searched: a secret is split
// across rows there.
func (st *state) hexDumps(text string) string {
	rows := hexRow.FindAllStringSubmatchIndex(text, -1)
	if len(rows) == 0 {
		return text
	}
	var b strings.Builder
	last := 0
	for i := 0; i < len(rows); {
		// A dump is a run of rows whose offsets grow by 16.
		j := i + 1
		for j < len(rows) && offset(text, rows[j]) == offset(text, rows[j-1])+16 {
			j++
		}
		var data []byte
		for _, r := range rows[i:j] {
			for _, h := range strings.Fields(text[r[4]:r[5]]) {
				if c, err := hex.DecodeString(h); err == nil {
					data = append(data, c...)
				}
			}
		}
		if st.holds(data) {
			for _, r := range rows[i:j] {
				if r[0] < last {
					continue
				}
				b.WriteString(text[last:r[0]])
				b.WriteString(text[r[2]:r[3]] + "  " + marker)
				last = rowEnd(text, r[1])
			}
		}
		i = j
	}
	b.WriteString(text[last:])
	return b.String()
}

// rowEnd is where the row that continues at from ends: its line break (a
// real one, or the escaped one of a JSON log line), or the end of text.
func rowEnd(text string, from int) int {
	end := len(text)
	if k := strings.IndexByte(text[from:], '\n'); k >= 0 {
		end = from + k
	}
	if k := strings.Index(text[from:], `\n`); k >= 0 && from+k < end {
		end = from + k
	}
	return end
}

func offset(text string, row []int) int64 {
	var n int64
	for _, c := range text[row[2]:row[3]] {
		n = n*16 + int64(strings.IndexRune("0123456789abcdef", c))
	}
	return n
}

func (st *state) holds(data []byte) bool {
	s := string(data)
	for _, r := range st.raw {
		if strings.Contains(s, string(r)) {
			return true
		}
	}
	return st.replacer.Replace(s) != s
}
