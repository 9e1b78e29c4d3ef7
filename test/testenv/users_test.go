package testenv

import (
	"bytes"
	"encoding/csv"
	"reflect"
	"strings"
	"testing"
)

func TestValidateUsers(t *testing.T) {
	tests := []struct {
		name    string
		users   []User
		wantErr string
	}{
		{"none", nil, ""},
		{"plain and service account", []User{{Name: "alice"}, ServiceAccountUser("kube-system", "ccm")}, ""},
		{"empty name", []User{{Name: " "}}, "Options.Users[0] has no Name"},
		{"duplicate", []User{{Name: "bob"}, {Name: "bob"}}, `user "bob" is given twice`},
		{"clashes with admin", []User{{Name: adminUser.Name}}, "is the built-in admin"},
		{"comma in group", []User{{Name: "carol", Groups: []string{"a,b"}}}, "no comma"},
		{"empty group", []User{{Name: "carol", Groups: []string{""}}}, "must be non-empty"},
		{"newline in name", []User{{Name: "x\ny"}}, "line break"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := validateUsers(tt.users)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

func TestTokenFile(t *testing.T) {
	users := []User{
		{Name: "admin", Groups: []string{"system:masters"}},
		{Name: "alice"},
		ServiceAccountUser("kube-system", "cloud-controller-manager"),
	}
	data, err := tokenFile(users, []string{"t0", "t1", "t2"})
	if err != nil {
		t.Fatal(err)
	}
	// kube-apiserver reads the file as CSV with a variable field count.
	r := csv.NewReader(bytes.NewReader(data))
	r.FieldsPerRecord = -1
	got, err := r.ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{
		{"t0", "admin", "admin", "system:masters"},
		{"t1", "alice", "alice"},
		{"t2", "system:serviceaccount:kube-system:cloud-controller-manager", "system:serviceaccount:kube-system:cloud-controller-manager",
			"system:serviceaccounts,system:serviceaccounts:kube-system"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("token file records:\n got %q\nwant %q", got, want)
	}
	if _, err := tokenFile(users, []string{"only-one"}); err == nil {
		t.Fatal("tokenFile accepted fewer tokens than users")
	}
}
