package provider

import (
	"context"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/eip"
	"github.com/metal-ccm/cloud-provider-equinix-metal/test/emulator"
)

// TestPrefixLimitAction (upstream issue #457): with bgpMaxPrefixes 2 and
// two Services announced, a third Service's Elastic IP is refused under
// bgpMaxPrefixesAction=refuse (no reservation, a Warning on the Service
// naming the limit and the fixes), and reserved under the default, warn,
// with the BGPPrefixLimitExceeded warning on the BGP node.
func TestPrefixLimitAction(t *testing.T) {
	t.Parallel()
	cases := []struct {
		action string // "" leaves the default
		refuse bool
	}{
		{action: "refuse", refuse: true},
		{action: ""},
	}
	for _, c := range cases {
		t.Run("action="+c.action, func(t *testing.T) {
			settings := map[string]any{"bgpMaxPrefixes": 2}
			if c.action != "" {
				settings["bgpMaxPrefixesAction"] = c.action
			}
			h := newHarness(t, harnessOptions{settings: settings})
			h.addNode("node-0", nil)
			metro := map[string]string{"metal.equinix.com/eip-metro": "da"}
			for _, name := range []string{"web-0", "web-1"} {
				h.addService(name, metro, "")
				h.eventually(name+" gets an address under the limit", func() (bool, string) {
					ip, why := h.serviceIP(name)
					return ip != "", why
				})
			}
			h.addService("web-2", metro, "")
			if c.refuse {
				h.eventually("web-2 is refused with an Event", func() (bool, string) {
					ev := h.serviceEvents("web-2", "ElasticIPRefusedPrefixLimit")
					if len(ev) == 0 {
						return false, h.events("web-2")
					}
					msg := ev[0].Message
					for _, want := range []string{"Warning", "bgpMaxPrefixes 2", "max prefix", "delete"} {
						if !strings.Contains(ev[0].Type+" "+msg, want) {
							return false, fmt.Sprintf("the Event lacks %q: %s %s", want, ev[0].Type, msg)
						}
					}
					return true, ""
				})
				t.Logf("web-2: %s", h.events("web-2"))
				if res := h.emu.Reservations(emulator.DefaultProjectID, eip.Tags(h.clusterID(), "default", "web-2")...); len(res) != 0 {
					t.Errorf("web-2 has reservations %+v past the limit; want none", res)
				}
				if ip, _ := h.serviceIP("web-2"); ip != "" {
					t.Errorf("web-2 got %s past the limit", ip)
				}
				return
			}
			h.eventually("web-2 gets an address past the limit, as before", func() (bool, string) {
				ip, why := h.serviceIP("web-2")
				return ip != "", why
			})
			h.eventually("node-0 is warned", func() (bool, string) {
				list, err := h.kube.CoreV1().Events("").List(context.Background(), metav1.ListOptions{FieldSelector: "reason=BGPPrefixLimitExceeded,involvedObject.name=node-0"})
				if err != nil {
					return false, err.Error()
				}
				return len(list.Items) == 1, fmt.Sprintf("%d BGPPrefixLimitExceeded Events on node-0", len(list.Items))
			})
			if ev := h.serviceEvents("web-2", "ElasticIPRefusedPrefixLimit"); len(ev) != 0 {
				t.Errorf("web-2 refused under the default: %s", ev[0].Message)
			}
		})
	}
}

// TestPrefixLimitPerMetro: an Elastic IP is announced only by the BGP nodes
// of its metro, so the limit is per metro: with bgpMaxPrefixes 2 and
// bgpMaxPrefixesAction=refuse, two Services in sv fill sv's nodes' budget
// (a third in sv is refused, naming the metro) and leave da's untouched (a
// Service in da gets its address).
func TestPrefixLimitPerMetro(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{settings: map[string]any{"bgpMaxPrefixes": 2, "bgpMaxPrefixesAction": "refuse"}})
	h.addNode("node-0", nil)
	sv := map[string]string{"metal.equinix.com/eip-metro": "sv"}
	da := map[string]string{"metal.equinix.com/eip-metro": "da"}
	for _, name := range []string{"sv-0", "sv-1"} {
		h.addService(name, sv, "")
		h.eventually(name+" gets an address under sv's limit", func() (bool, string) {
			ip, why := h.serviceIP(name)
			return ip != "", why
		})
	}
	h.addService("da-0", da, "")
	h.eventually("da-0 gets an address: sv's addresses are not announced in da", func() (bool, string) {
		ip, why := h.serviceIP("da-0")
		return ip != "", why + " " + h.events("da-0")
	})
	h.addService("sv-2", sv, "")
	h.eventually("sv-2 is refused, naming metro sv", func() (bool, string) {
		ev := h.serviceEvents("sv-2", "ElasticIPRefusedPrefixLimit")
		return len(ev) > 0 && strings.Contains(ev[0].Message, "in metro sv already announce 2"), h.events("sv-2")
	})
}
