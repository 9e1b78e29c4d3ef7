package metal

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"k8s.io/component-base/metrics"
	"k8s.io/klog/v2"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/config"
	"github.com/metal-ccm/cloud-provider-equinix-metal/host/redact"
)

// errKeyRejected is wrapped by every error of a call refused without asking
// the API because the key was rejected (401) recently.
var errKeyRejected = errors.New("the Equinix Metal API rejected the API key")

// keyProbeInterval is how often, while the key is rejected, one call is let
// through to see whether the key works again (it may have been re-enabled
// in the console). Every other call fails at once: many workers retrying
// with a key the API refuses would only be a storm of 401s.
var keyProbeInterval = 30 * time.Second

var (
	keyRejected = metrics.NewGauge(&metrics.GaugeOpts{
		Name:           "equinix_metal_api_key_rejected",
		Help:           "1 while the Equinix Metal API rejects the API key (its last answer was 401), else 0.",
		StabilityLevel: metrics.ALPHA,
	})
	authFailures = metrics.NewCounterVec(&metrics.CounterOpts{
		Name:           "equinix_metal_api_auth_failures_total",
		Help:           "Answers 401 (key rejected) and 403 (key not allowed this project or operation) from the Equinix Metal API, by code.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"code"})
	keyRotations = metrics.NewCounter(&metrics.CounterOpts{
		Name:           "equinix_metal_api_key_rotations_total",
		Help:           "API keys taken into use without a restart (a changed cloud-config file).",
		StabilityLevel: metrics.ALPHA,
	})
)

// authState follows whether the API accepts the key. It logs each change
// once (not each failed call), sets the gauge, and holds calls back while
// the key is rejected.
type authState struct {
	mu        sync.Mutex
	key       config.Secret
	rejected  bool
	since     time.Time
	lastProbe time.Time
	forbidden bool // the last 401/403 seen was a 403
	now       func() time.Time
}

func newAuthState(key config.Secret) *authState {
	return &authState{key: key, now: time.Now}
}

// current returns the key to send, or an error when the call must not be
// sent because the key was rejected and it is not yet time to probe.
func (a *authState) current() (config.Secret, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.rejected {
		if now := a.now(); now.Sub(a.lastProbe) < keyProbeInterval {
			return "", fmt.Errorf("%w (401 since %s); no call is sent until the key changes (rotate apiKey in the cloud-config Secret; the CCM picks it up without a restart) or the next probe in %s",
				errKeyRejected, a.since.UTC().Format(time.RFC3339), (keyProbeInterval - now.Sub(a.lastProbe)).Round(time.Second))
		} else {
			a.lastProbe = now
		}
	}
	return a.key, nil
}

// observe records the answer to a call made with key.
func (a *authState) observe(ctx context.Context, key config.Secret, resp *http.Response) {
	if resp == nil {
		return
	}
	code := resp.StatusCode
	a.mu.Lock()
	defer a.mu.Unlock()
	if key != a.key {
		return // an answer to the previous key says nothing about this one
	}
	switch {
	case code == http.StatusUnauthorized:
		authFailures.WithLabelValues("401").Inc()
		if !a.rejected {
			a.rejected, a.since, a.lastProbe = true, a.now(), a.now()
			keyRejected.Set(1)
			klog.FromContext(ctx).Error(nil, "The Equinix Metal API rejects the API key (401 Unauthorized); calls are held back until the key changes; put a valid key into apiKey of the cloud-config Secret (no restart needed)", "operation", opLabel(ctx))
		}
	case code == http.StatusForbidden:
		authFailures.WithLabelValues("403").Inc()
		if !a.forbidden {
			a.forbidden = true
			klog.FromContext(ctx).Error(nil, "The Equinix Metal API refuses the API key this call (403 Forbidden); check that the key belongs to the project (projectID) and is not read-only", "operation", opLabel(ctx))
		}
	case code < 400:
		if a.rejected {
			klog.FromContext(ctx).Info("The Equinix Metal API accepts the API key again", "operation", opLabel(ctx))
		}
		a.rejected, a.forbidden = false, false
		keyRejected.Set(0)
	}
}

// set takes a new key into use: the next call is sent with it, whatever
// happened to the old one.
func (a *authState) set(key config.Secret) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if key == a.key || key == "" {
		return false
	}
	a.key, a.rejected, a.forbidden = key, false, false
	keyRejected.Set(0)
	return true
}

// status reports whether the key is rejected and why, for readiness.
func (a *authState) status() (ok bool, reason string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.rejected {
		return false, fmt.Sprintf("the Equinix Metal API has rejected the API key (401) since %s", a.since.UTC().Format(time.RFC3339))
	}
	return true, ""
}

// SetAPIKey takes a new API key into use without a restart (a rotated key
// in the cloud-config Secret). It reports whether the key changed.
func (c *Client) SetAPIKey(key config.Secret) bool {
	redact.Default.Add(key.Reveal())
	if !c.auth.set(key) {
		return false
	}
	keyRotations.Inc()
	klog.InfoS("Equinix Metal API key rotated; the next calls use the new key")
	return true
}

// KeyAccepted reports whether the API accepts the key as far as the last
// answers tell, and if not, why.
func (c *Client) KeyAccepted() (bool, string) { return c.auth.status() }
