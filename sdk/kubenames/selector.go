package kubenames

import (
	"fmt"
	"strconv"
)

// ValidateSelector checks a label selector in the syntax of
// apimachinery's labels.Parse ("a=b,c!=d,e in (f,g),!h,i,j>1"): the same
// inputs are accepted, including its corner cases (empty values, "()",
// "in" and "notin" as keys or values). The empty selector is valid.
func ValidateSelector(s string) error {
	p := selectorParser{toks: lexSelector(s)}
	if err := p.parse(); err != nil {
		return fmt.Errorf("unable to parse requirement: %w", err)
	}
	return nil
}

type tokKind int

const (
	tokEnd tokKind = iota
	tokIdent
	tokIn
	tokNotIn
	tokNot      // !
	tokEq       // =
	tokEqEq     // ==
	tokNotEq    // !=
	tokGt       // >
	tokLt       // <
	tokOpenPar  // (
	tokClosePar // )
	tokComma    // ,
)

type token struct {
	kind tokKind
	lit  string
}

func isSelectorSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

func isSelectorSymbol(c byte) bool {
	switch c {
	case '=', '!', '(', ')', ',', '>', '<':
		return true
	}
	return false
}

var symbols = map[string]tokKind{"=": tokEq, "==": tokEqEq, "!": tokNot, "!=": tokNotEq, ">": tokGt, "<": tokLt, "(": tokOpenPar, ")": tokClosePar, ",": tokComma}

// lexSelector splits s into tokens as apimachinery's lexer does, quirks
// included: a NUL byte where a token starts ends the input, and a NUL byte
// that ends a token is consumed as a separator.
func lexSelector(s string) []token {
	var out []token
	i := 0
	for {
		for i < len(s) && isSelectorSpace(s[i]) {
			i++
		}
		if i >= len(s) || s[i] == 0 {
			return append(out, token{kind: tokEnd})
		}
		start := i
		if isSelectorSymbol(s[i]) {
			// The longest symbol: "!=" and "==" are the only two-byte ones.
			n := 1
			if i+1 < len(s) && s[i+1] == '=' && (s[i] == '!' || s[i] == '=') {
				n = 2
			}
			out = append(out, token{symbols[s[i:i+n]], s[i : i+n]})
			i += n
		} else {
			for i < len(s) && s[i] != 0 && !isSelectorSymbol(s[i]) && !isSelectorSpace(s[i]) {
				i++
			}
			switch lit := s[start:i]; lit {
			case "in":
				out = append(out, token{tokIn, lit})
			case "notin":
				out = append(out, token{tokNotIn, lit})
			default:
				out = append(out, token{tokIdent, lit})
			}
		}
		if i < len(s) && s[i] == 0 {
			i++
		}
	}
}

type selectorParser struct {
	toks []token
	pos  int
}

// peek and next see "in" and "notin" as identifiers (they may be keys and
// values); only the operator position reads them as keywords (op).
func (p *selectorParser) peek() token { return asIdent(p.toks[p.pos]) }

func (p *selectorParser) next() token {
	t := p.toks[p.pos]
	if p.pos < len(p.toks)-1 {
		p.pos++
	}
	return asIdent(t)
}

func asIdent(t token) token {
	if t.kind == tokIn || t.kind == tokNotIn {
		t.kind = tokIdent
	}
	return t
}

func (p *selectorParser) parse() error {
	for {
		switch t := p.peek(); t.kind {
		case tokEnd:
			return nil
		case tokIdent, tokNot:
			if err := p.requirement(); err != nil {
				return err
			}
			switch t := p.next(); t.kind {
			case tokEnd:
				return nil
			case tokComma:
				if k := p.peek().kind; k != tokIdent && k != tokNot {
					return fmt.Errorf("found '%s', expected: identifier after ','", p.peek().lit)
				}
			default:
				return fmt.Errorf("found '%s', expected: ',' or 'end of string'", t.lit)
			}
		default:
			return fmt.Errorf("found '%s', expected: !, identifier, or 'end of string'", t.lit)
		}
	}
}

// requirement is [!]key, or key op value(s).
func (p *selectorParser) requirement() error {
	t := p.next()
	negated := t.kind == tokNot
	if negated {
		t = p.next()
	}
	if t.kind != tokIdent {
		return fmt.Errorf("found '%s', expected: identifier", t.lit)
	}
	key := t.lit
	if err := ValidateQualifiedName(key); err != nil {
		return fmt.Errorf("key %q: %v", key, err)
	}
	if k := p.peek().kind; negated || k == tokEnd || k == tokComma {
		return nil // exists or does not exist: no values
	}
	op := p.toks[p.pos]
	p.next()
	var values []string
	var err error
	switch op.kind {
	case tokIn, tokNotIn:
		values, err = p.valueSet()
	case tokEq, tokEqEq, tokNotEq, tokGt, tokLt:
		values, err = p.exactValue()
	default:
		return fmt.Errorf("found '%s', expected: in, notin, =, ==, !=, gt, lt", op.lit)
	}
	if err != nil {
		return err
	}
	for _, v := range values {
		if op.kind == tokGt || op.kind == tokLt {
			if _, err := strconv.ParseInt(v, 10, 64); err != nil {
				return fmt.Errorf("for 'Gt', 'Lt' operators, the value must be an integer, not %q", v)
			}
		}
		if err := ValidateLabelValue(v); err != nil {
			return fmt.Errorf("value %q of %s: %v", v, key, err)
		}
	}
	return nil
}

// valueSet is "(" [value] {"," [value]} ")"; an empty value is allowed
// anywhere, and "()" is the set of the empty value.
func (p *selectorParser) valueSet() ([]string, error) {
	if t := p.next(); t.kind != tokOpenPar {
		return nil, fmt.Errorf("found '%s' expected: '('", t.lit)
	}
	var values []string
	expectValue := true // after "(" or ","
	for {
		t := p.next()
		switch {
		case t.kind == tokClosePar:
			if expectValue {
				values = append(values, "")
			}
			return values, nil
		case t.kind == tokComma:
			if expectValue {
				values = append(values, "")
			}
			expectValue = true
		case t.kind == tokIdent && expectValue:
			values = append(values, t.lit)
			expectValue = false
		default:
			return nil, fmt.Errorf("found '%s', expected: ',', ')' or identifier", t.lit)
		}
	}
}

// exactValue is one value, possibly empty (then the requirement ends).
func (p *selectorParser) exactValue() ([]string, error) {
	switch t := p.peek(); t.kind {
	case tokEnd, tokComma:
		return []string{""}, nil
	case tokIdent:
		p.next()
		return []string{t.lit}, nil
	default:
		return nil, fmt.Errorf("found '%s', expected: identifier", t.lit)
	}
}
