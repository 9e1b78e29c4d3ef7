package emulator

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strings"
)

// AdminPath is where the admin endpoints live. They need no token.
const AdminPath = "/_emulator"

func validRoute(r Route) bool {
	return r == AllRoutes || r == RouteUnmatched || slices.Contains(Routes(), r)
}

func mustRoute(r Route) {
	if !validRoute(r) {
		panic(fmt.Sprintf("emulator: unknown route %q; use one of the Route constants", r))
	}
}

// adminFault is the body of POST /_emulator/faults.
type adminFault struct {
	Route Route `json:"route"`
	Fault
}

// adminFailNext is the body of POST /_emulator/fail-next.
type adminFailNext struct {
	Route Route `json:"route"`
	Count int   `json:"count"`
	Failure
}

// CountersView is the body of GET /_emulator/counters.
type CountersView struct {
	Total  int64                `json:"total"`
	Routes map[Route]RouteStats `json:"routes"`
}

// StateView is the body of GET /_emulator/state.
type StateView struct {
	Projects []ProjectView `json:"projects"`
}

// ProjectView is one project in StateView.
type ProjectView struct {
	Project
	BGPConfig    *BGPConfig    `json:"bgp_config,omitempty"`
	Devices      []Device      `json:"devices"`
	Reservations []Reservation `json:"reservations"`
}

func (e *Emulator) adminRoutes(mux *http.ServeMux) {
	h := func(pattern string, f func(w http.ResponseWriter, r *http.Request) (any, error)) {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			v, err := f(w, r)
			switch {
			case err != nil:
				writeError(w, http.StatusUnprocessableEntity, err.Error())
			case v == nil:
				w.WriteHeader(http.StatusNoContent)
			default:
				writeJSON(w, http.StatusOK, v)
			}
		})
	}
	h("GET "+AdminPath+"/healthz", func(http.ResponseWriter, *http.Request) (any, error) {
		return map[string]string{"status": "ok"}, nil
	})
	h("GET "+AdminPath+"/routes", func(http.ResponseWriter, *http.Request) (any, error) { return Routes(), nil })
	h("GET "+AdminPath+"/counters", func(http.ResponseWriter, *http.Request) (any, error) {
		return CountersView{Total: e.TotalRequests(), Routes: e.Stats()}, nil
	})
	h("DELETE "+AdminPath+"/counters", func(http.ResponseWriter, *http.Request) (any, error) {
		e.ResetCounts()
		return nil, nil
	})
	h("GET "+AdminPath+"/faults", func(http.ResponseWriter, *http.Request) (any, error) {
		st, sc := e.Faults()
		return map[string]any{"standing": st, "scripted": sc, "injected": e.InjectedFaults()}, nil
	})
	h("POST "+AdminPath+"/faults", func(_ http.ResponseWriter, r *http.Request) (any, error) {
		var in adminFault
		if err := decodeStrict(r, &in); err != nil {
			return nil, err
		}
		if !validRoute(in.Route) {
			return nil, fmt.Errorf("unknown route %q; GET %s/routes lists them (or use \"*\")", in.Route, AdminPath)
		}
		e.SetFault(in.Route, in.Fault)
		return nil, nil
	})
	h("DELETE "+AdminPath+"/faults", func(http.ResponseWriter, *http.Request) (any, error) {
		e.ClearFaults()
		return nil, nil
	})
	h("POST "+AdminPath+"/fail-next", func(_ http.ResponseWriter, r *http.Request) (any, error) {
		var in adminFailNext
		if err := decodeStrict(r, &in); err != nil {
			return nil, err
		}
		if !validRoute(in.Route) {
			return nil, fmt.Errorf("unknown route %q; GET %s/routes lists them (or use \"*\")", in.Route, AdminPath)
		}
		if in.Count <= 0 {
			in.Count = 1
		}
		e.FailNext(in.Route, in.Count, in.Failure)
		return nil, nil
	})
	h("GET "+AdminPath+"/state", func(http.ResponseWriter, *http.Request) (any, error) {
		var out StateView
		for _, p := range e.Projects() {
			pv := ProjectView{Project: p, Devices: e.Devices(p.ID), Reservations: e.Reservations(p.ID)}
			if b, ok := e.BGPConfig(p.ID); ok {
				pv.BGPConfig = &b
			}
			out.Projects = append(out.Projects, pv)
		}
		return out, nil
	})
	h("POST "+AdminPath+"/seed", func(_ http.ResponseWriter, r *http.Request) (any, error) {
		b, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
		if err != nil {
			return nil, err
		}
		ext := ".json"
		if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); strings.Contains(mt, "yaml") {
			ext = ".yaml"
		}
		seed, err := ParseSeed(b, ext)
		if err != nil {
			return nil, err
		}
		return nil, e.Apply(seed)
	})
	h("POST "+AdminPath+"/devices/{id}/state", func(_ http.ResponseWriter, r *http.Request) (any, error) {
		var in struct {
			State string `json:"state"`
		}
		if err := decodeStrict(r, &in); err != nil {
			return nil, err
		}
		return nil, e.SetDeviceState(r.PathValue("id"), in.State)
	})
	h("DELETE "+AdminPath+"/devices/{id}", func(_ http.ResponseWriter, r *http.Request) (any, error) {
		return nil, e.DeleteDevice(r.PathValue("id"))
	})
	h("POST "+AdminPath+"/reservations/{id}/approve", func(_ http.ResponseWriter, r *http.Request) (any, error) {
		return nil, e.ApproveReservation(r.PathValue("id"))
	})
}

func decodeStrict(r *http.Request, v any) error {
	dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("request body: %w", err)
	}
	return nil
}
