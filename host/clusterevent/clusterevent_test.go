package clusterevent_test

import (
	"testing"
	"time"

	"k8s.io/client-go/tools/record"
	testclock "k8s.io/utils/clock/testing"

	"github.com/metal-ccm/cloud-provider-equinix-metal/host/clusterevent"
)

func TestReporter(t *testing.T) {
	type step struct {
		fail          string // cause; "" is a success
		at            time.Duration
		wantRecorded  bool
		wantEventHead string
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"a repeated cause is recorded once", []step{
			{"trap", 0, true, "Warning Failed trap"},
			{"trap", time.Second, false, ""},
			{"trap", time.Minute, false, ""},
		}},
		{"a new cause is recorded", []step{
			{"trap", 0, true, "Warning Failed trap"},
			{"deadline", time.Second, true, "Warning Failed deadline"},
			{"trap", 2 * time.Second, true, "Warning Failed trap"},
		}},
		{"a success ends the failure, once", []step{
			{"trap", 0, true, "Warning Failed trap"},
			{"", time.Second, true, "Normal Recovered all good"},
			{"", 2 * time.Second, false, ""},
			{"trap", 3 * time.Second, true, "Warning Failed trap"},
		}},
		{"a lasting failure is recorded again after Repeat", []step{
			{"trap", 0, true, "Warning Failed trap"},
			{"trap", 49 * time.Minute, false, ""},
			{"trap", 51 * time.Minute, true, "Warning Failed trap"},
		}},
		{"a success without a failure records nothing", []step{
			{"", 0, false, ""},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			start := time.Unix(1_700_000_000, 0)
			clock := testclock.NewFakePassiveClock(start)
			rec := record.NewFakeRecorder(10)
			rec.IncludeObject = true
			r := &clusterevent.Reporter{Recorder: rec, Reason: "Failed", RecoveredReason: "Recovered", RecoveredMessage: "all good", Clock: clock}
			for i, s := range c.steps {
				clock.SetTime(start.Add(s.at))
				var got bool
				if s.fail != "" {
					got = r.Failed(s.fail, s.fail)
				} else {
					got = r.Succeeded()
				}
				if got != s.wantRecorded {
					t.Fatalf("step %d: recorded %v, want %v", i, got, s.wantRecorded)
				}
				select {
				case e := <-rec.Events:
					want := s.wantEventHead + " involvedObject{kind=Namespace,apiVersion=v1}"
					if e != want {
						t.Fatalf("step %d: event %q, want %q", i, e, want)
					}
				default:
					if s.wantEventHead != "" {
						t.Fatalf("step %d: no event, want %q", i, s.wantEventHead)
					}
				}
			}
		})
	}
}
