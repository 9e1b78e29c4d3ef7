package controlplane

import (
	"time"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/config"
)

// Options configure a Manager: OptionsFromConfig makes them from the
// validated configuration, and tests set the fields the configuration has
// no key for. Zero values take the defaults named below.
type Options struct {
	// EIPTag is the tag of the control-plane EIP reservation. Required.
	EIPTag string
	// APIServerPort is the port of the EIP; 0 uses the kube-apiserver's
	// port (the targetPort of default/kubernetes).
	APIServerPort int
	// UseHostIP probes the holder node's own addresses instead of the EIP;
	// needed when the EIP is bound to a loopback interface on the nodes.
	UseHostIP bool
	// Interval between probe rounds; default 2s.
	Interval time.Duration
	// FastInterval is the interval while the holder has failed some probes
	// but not yet Failures of them, so that a dead holder is confirmed
	// quickly while one slow answer still moves nothing; default
	// Interval/4.
	FastInterval time.Duration
	// Timeout of one probe; default 1s.
	Timeout time.Duration
	// Failures is how many consecutive failed probes move the EIP; default 3.
	Failures int
	// Rise is how many consecutive passed probes make a node eligible to
	// receive the EIP; default 2.
	Rise int
	// Grace after the holder changed during which failed probes of the EIP
	// do not count, while the network learns the new route; default
	// 5×Interval when probing the EIP, 0 with UseHostIP.
	Grace time.Duration
	// Resync is how often the reservation is re-read from Equinix and the
	// external Service re-applied even when nothing seemed to change;
	// default 30s.
	Resync time.Duration
	// Dial replaces the probes' dialer (tests route the EIP with it).
	Dial dialFunc
}

// OptionsFromConfig maps the validated configuration onto Options.
func OptionsFromConfig(cfg *config.Config) Options {
	return Options{
		EIPTag:        cfg.EIPTag,
		APIServerPort: cfg.APIServerPort,
		UseHostIP:     cfg.EIPHealthCheckUseHostIP,
		Interval:      cfg.HealthCheckInterval,
		Timeout:       cfg.HealthCheckTimeout,
		Failures:      cfg.HealthCheckFailures,
	}
}

func (o Options) withDefaults() Options {
	if o.Interval <= 0 {
		o.Interval = 2 * time.Second
	}
	if o.FastInterval <= 0 {
		o.FastInterval = o.Interval / 4
	}
	if o.Timeout <= 0 {
		o.Timeout = time.Second
	}
	if o.Failures < 1 {
		o.Failures = 3
	}
	if o.Rise < 1 {
		o.Rise = 2
	}
	if o.Grace <= 0 && !o.UseHostIP {
		o.Grace = 5 * o.Interval
	}
	if o.Resync <= 0 {
		o.Resync = 30 * time.Second
	}
	return o
}
