package testenv

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"strings"
)

// User is an extra user that kube-apiserver authenticates by bearer token
// (--token-auth-file). It has no rights until a test binds it with RBAC,
// which is the point: a client built with Env.UserConfig sees exactly what
// the Roles in deploy/ allow.
type User struct {
	Name   string   // user name as RBAC subjects see it
	Groups []string // groups; "system:authenticated" is added by the server
}

// ServiceAccountUser returns the token user that kube-apiserver treats like
// the ServiceAccount namespace/name: its user name and groups are the ones
// RBAC matches for a subject of kind ServiceAccount. Tests use it to run the
// CCM under a RoleBinding to its ServiceAccount without minting real tokens.
func ServiceAccountUser(namespace, name string) User {
	return User{
		Name:   "system:serviceaccount:" + namespace + ":" + name,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace},
	}
}

// adminUser is the user Env.Config acts as; system:masters bypasses RBAC.
var adminUser = User{Name: "testenv-admin", Groups: []string{"system:masters"}}

// validateUsers rejects users kube-apiserver would reject or confuse.
func validateUsers(users []User) error {
	seen := map[string]bool{adminUser.Name: true}
	for i, u := range users {
		switch {
		case strings.TrimSpace(u.Name) == "":
			return fmt.Errorf("testenv: Options.Users[%d] has no Name: give every user a name", i)
		case seen[u.Name]:
			return fmt.Errorf("testenv: user %q is given twice (or is the built-in admin): use distinct names", u.Name)
		case strings.ContainsAny(u.Name, "\n\r"):
			return fmt.Errorf("testenv: user name %q contains a line break: remove it", u.Name)
		}
		for _, g := range u.Groups {
			if g == "" || strings.ContainsAny(g, ",\n\r") {
				return fmt.Errorf("testenv: user %q has group %q: groups must be non-empty and contain no comma or line break", u.Name, g)
			}
		}
		seen[u.Name] = true
	}
	return nil
}

// tokenFile renders kube-apiserver's static token file: one CSV line
// "token,user,uid,group1,group2..." where the groups are one quoted field.
func tokenFile(users []User, tokens []string) ([]byte, error) {
	if len(users) != len(tokens) {
		return nil, fmt.Errorf("testenv: %d users but %d tokens", len(users), len(tokens))
	}
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	for i, u := range users {
		rec := []string{tokens[i], u.Name, u.Name}
		if len(u.Groups) > 0 {
			rec = append(rec, strings.Join(u.Groups, ","))
		}
		if err := w.Write(rec); err != nil {
			return nil, fmt.Errorf("testenv: writing token file: %w", err)
		}
	}
	w.Flush()
	return buf.Bytes(), w.Error()
}
