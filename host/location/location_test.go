package location

import "testing"

func TestLocation(t *testing.T) {
	tests := []struct {
		loc     Location
		str     string
		invalid bool
	}{
		{Location{Metro: "da"}, "metro da", false},
		{Location{Facility: "da11"}, "facility da11", false},
		{Location{}, "metro ", true},
		{Location{Metro: "da", Facility: "da11"}, "facility da11", true},
	}
	for _, tt := range tests {
		if got := tt.loc.String(); got != tt.str {
			t.Errorf("%+v.String() = %q; want %q", tt.loc, got, tt.str)
		}
		if err := tt.loc.Validate(); (err != nil) != tt.invalid {
			t.Errorf("%+v.Validate() = %v; want invalid=%v", tt.loc, err, tt.invalid)
		}
	}
}
