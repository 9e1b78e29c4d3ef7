package schema

import (
	"errors"
	"strings"
)

// checkQuantity accepts what resource.ParseQuantity does: a signed decimal
// number (digits with at most one point, at least one digit) and then
// nothing, a binary suffix (Ki Mi Gi Ti Pi Ei), a decimal one (n u m k M G
// T P E) or an exponent (e or E, an optional sign, digits).
func checkQuantity(s string) error {
	if s == "" {
		return errors.New("empty")
	}
	i := 0
	if s[0] == '+' || s[0] == '-' {
		i++
	}
	digits, point := 0, false
	for ; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			digits++
			continue
		case c == '.' && !point:
			point = true
			continue
		}
		break
	}
	if digits == 0 {
		return errors.New("no digits before the suffix")
	}
	suffix := s[i:]
	switch suffix {
	case "", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "n", "u", "m", "k", "M", "G", "T", "P", "E":
		return nil
	}
	if suffix[0] == 'e' || suffix[0] == 'E' {
		exp := suffix[1:]
		if exp != "" && (exp[0] == '+' || exp[0] == '-') {
			exp = exp[1:]
		}
		if exp != "" && strings.Trim(exp, "0123456789") == "" {
			return nil
		}
	}
	return errors.New("unknown suffix " + suffix)
}
