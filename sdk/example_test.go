package sdk_test

import (
	"encoding/json"
	"fmt"

	"github.com/metal-ccm/cloud-provider-equinix-metal/sdk"
)

// A module that publishes, for each Service, a ConfigMap listing its
// addresses. In a real module the Module value and the two functions live
// in package main next to
//
//	func init() { sdk.Register(module) }
//	func main() {}
//
// and it is built with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -o mine.wasm .
//
// then named in the CCM's loadbalancer setting as
// wasm:///etc/ccm/modules/mine.wasm?namespace=lb (the query parameters
// reach the module as Options.Params).
func Example() {
	module := sdk.Module{
		Name:    "addresses",
		Version: "0.1.0",
		Describe: func(o sdk.Options) (sdk.Description, error) {
			return sdk.Description{Emits: []sdk.ObjectKind{{APIVersion: "v1", Kind: "ConfigMap", Namespace: o.Params["namespace"]}}}, nil
		},
		Generate: func(req sdk.GenerateRequest) (sdk.GenerateResponse, error) {
			var resp sdk.GenerateResponse
			for _, s := range req.Services {
				ips := make([]any, len(s.IPs))
				for i, ip := range s.IPs {
					ips[i] = ip
				}
				resp.Objects = append(resp.Objects, sdk.Object{
					"apiVersion": "v1", "kind": "ConfigMap",
					"metadata": map[string]any{"name": s.Namespace + "." + s.Name, "namespace": req.Options.Params["namespace"]},
					"data":     map[string]any{"addresses": fmt.Sprint(ips...)},
				})
			}
			return resp, nil
		},
	}

	// What the host sends (it fills options from the URL) and what the
	// module answers: the same bytes the Wasm export would hand back.
	req, _ := json.Marshal(sdk.GenerateRequest{
		APIVersion: sdk.APIVersion, Kind: sdk.KindGenerateRequest,
		Options:  sdk.Options{Params: map[string]string{"namespace": "lb"}},
		Services: []sdk.Service{{Namespace: "shop", Name: "web", IPs: []string{"145.40.1.5"}}},
	})
	out, err := module.HandleGenerate(req)
	if err != nil {
		panic(err)
	}
	fmt.Println(string(out))
	// Output:
	// {"apiVersion":"lb.metal.equinix.com/v1alpha1","kind":"GenerateResponse","objects":[{"apiVersion":"v1","data":{"addresses":"145.40.1.5"},"kind":"ConfigMap","metadata":{"name":"shop.web","namespace":"lb"}}]}
}
