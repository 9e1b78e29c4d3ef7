package schema

import (
	"encoding/base64"
	"encoding/json"
	"slices"
)

// configMapRules and secretRules are what the API server checks of these
// built-in kinds beyond their schema: ValidateConfigMap and ValidateSecret
// in k8s.io/kubernetes/pkg/apis/core/validation (Kubernetes 1.37). They
// run after the schema walk, so the maps they read hold strings (or null),
// and the base64 ones are valid.

// configMapRules: keys of data and binaryData are config keys and not in
// both, and the values total at most MaxDataBytes (binary ones decoded).
func configMapRules(w *walker, obj map[string]any) bool {
	data, _ := obj["data"].(map[string]any)
	bin, _ := obj["binaryData"].(map[string]any)
	total := 0
	for _, k := range w.keys(data) {
		if !w.configKey("data", k) {
			return false
		}
		if _, dup := bin[k]; dup {
			return w.failAt([]string{"data", k}, "is in binaryData too; a key may be in one of them only")
		}
		s, _ := data[k].(string)
		total += len(s)
	}
	for _, k := range w.keys(bin) {
		if !w.configKey("binaryData", k) {
			return false
		}
		s, _ := bin[k].(string)
		total += decodedLen(s)
	}
	if total > MaxDataBytes {
		return w.fail("data and binaryData total %d bytes, over the API server's limit of %d (1 MiB); split it into several ConfigMaps", total, MaxDataBytes)
	}
	return true
}

// secretRules: the API server merges stringData into data (stringData
// wins) and then checks data's keys, its size, and the keys the Secret's
// type requires.
func secretRules(w *walker, obj map[string]any) bool {
	data, _ := obj["data"].(map[string]any)
	str, _ := obj["stringData"].(map[string]any)
	if !secretKeysAndSize(w, data, str) {
		return false
	}
	return secretTypeRules(w, obj, secretData{data: data, str: str})
}

// secretKeysAndSize checks the keys of data and stringData, and that the
// merged values (data's decoded, those stringData overrides left out)
// total at most MaxDataBytes.
func secretKeysAndSize(w *walker, data, str map[string]any) bool {
	total := 0
	for _, k := range w.keys(data) {
		if !w.configKey("data", k) {
			return false
		}
		if _, over := str[k]; !over {
			s, _ := data[k].(string)
			total += decodedLen(s)
		}
	}
	for _, k := range w.keys(str) {
		if !w.configKey("stringData", k) {
			return false
		}
		s, _ := str[k].(string)
		total += len(s)
	}
	if total > MaxDataBytes {
		return w.failAt([]string{"data"}, "values total %d bytes (stringData included), over the API server's limit of %d (1 MiB)", total, MaxDataBytes)
	}
	return true
}

// secretData is a Secret's data and stringData as the API server merges
// them, without building the merged map: the type rules read a few keys.
type secretData struct{ data, str map[string]any }

// value is the merged data's value of key, decoded.
func (d secretData) value(key string) ([]byte, bool) {
	if v, ok := d.str[key]; ok {
		s, _ := v.(string)
		return []byte(s), true
	}
	v, ok := d.data[key]
	if !ok {
		return nil, false
	}
	s, _ := v.(string)
	b, _ := base64.StdEncoding.DecodeString(s)
	return b, true
}

// secretTypeRules checks the keys the Secret's type requires, as
// ValidateSecret does for each of the built-in types; any other type has
// none.
func secretTypeRules(w *walker, obj map[string]any, d secretData) bool {
	switch typ, _ := obj["type"].(string); typ {
	case "kubernetes.io/service-account-token":
		md, _ := obj["metadata"].(map[string]any)
		anns, _ := md["annotations"].(map[string]any)
		if s, _ := anns["kubernetes.io/service-account.name"].(string); s == "" {
			return w.failAt([]string{"metadata", "annotations", "kubernetes.io/service-account.name"}, "required by a Secret of type %s, but missing", typ)
		}
	case "kubernetes.io/dockercfg":
		return secretJSON(w, d, ".dockercfg")
	case "kubernetes.io/dockerconfigjson":
		return secretJSON(w, d, ".dockerconfigjson")
	case "kubernetes.io/basic-auth":
		// Either may be empty, but one must be there.
		_, u := d.value("username")
		_, p := d.value("password")
		if !u && !p {
			return w.failAt([]string{"data"}, "a Secret of type %s needs username or password (or both)", typ)
		}
	case "kubernetes.io/ssh-auth":
		if b, _ := d.value("ssh-privatekey"); len(b) == 0 {
			return w.failAt([]string{"data", "ssh-privatekey"}, "required (not empty) by a Secret of type %s, but missing", typ)
		}
	case "kubernetes.io/tls":
		return secretRequired(w, d, "tls.crt", "tls.key")
	}
	return true
}

// secretRequired checks that the merged data has each of keys.
func secretRequired(w *walker, d secretData, keys ...string) bool {
	for _, k := range keys {
		if _, ok := d.value(k); !ok {
			return w.failAt([]string{"data", k}, "required by a Secret of this type, but missing")
		}
	}
	return true
}

// secretJSON checks that the merged data has key and that its value is a
// JSON object.
func secretJSON(w *walker, d secretData, key string) bool {
	b, ok := d.value(key)
	if !ok {
		return secretRequired(w, d, key)
	}
	if err := json.Unmarshal(b, &map[string]any{}); err != nil {
		// The value is a credential: name the key, never quote it.
		return w.failAt([]string{"data", key}, "must be a JSON object for a Secret of this type: %v", err)
	}
	return true
}

// configKey checks a data key as IsConfigMapKey in
// k8s.io/apimachinery/pkg/util/validation does.
func (w *walker) configKey(in, k string) bool {
	msg := ""
	switch {
	case len(k) > 253:
		msg = "must be no more than 253 characters"
	case !configKeyChars(k):
		msg = "must consist of alphanumeric characters, '-', '_' or '.'"
	case k == ".", k == "..":
		msg = "must not be '" + k + "'"
	case len(k) >= 2 && k[:2] == "..":
		msg = "must not start with '..'"
	default:
		return true
	}
	return w.failAt([]string{in, k}, "invalid key: %s", msg)
}

func configKeyChars(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// keys are m's keys, in key order when the walk must be deterministic.
func (w *walker) keys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	if w.sorted {
		slices.Sort(keys)
	}
	return keys
}

// decodedLen is the length of valid standard base64 once decoded (the
// decoder skips line breaks), without decoding it.
func decodedLen(s string) int {
	n, pad := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\r', '\n':
		case '=':
			pad++
			n++
		default:
			n++
		}
	}
	return n/4*3 - pad
}
