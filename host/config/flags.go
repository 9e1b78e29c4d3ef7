package config

import (
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/spf13/pflag"
)

// FlagSetName is the section under which --help lists this CCM's own flags.
const FlagSetName = "Equinix Metal"

// AddFlags registers a flag for every non-secret option, with the option's
// default, so --help shows what applies when nothing else is set. Each flag
// has the type of its option's Config field, so --help shows what it takes
// and a bool flag alone (--metal-annotate-bgp-pass) means true.
//
// A flag's value is parsed by assign, the conversion of every other layer,
// so the command line accepts exactly what METAL_* and the cloud-config
// accept. A value that does not parse is refused while the command line is
// parsed; FlagError words that refusal as Load words a bad value.
func AddFlags(fs *pflag.FlagSet) {
	fields := fieldTypes()
	for _, o := range options {
		if o.flag == "" {
			continue
		}
		t, ok := fields[o.key]
		if !ok {
			panic("config: option " + o.key + " has no Config field")
		}
		typeName, ok := flagTypes[t]
		if !ok {
			panic("config: option " + o.key + " has a field of type " + t.String() + ", which has no flag type")
		}
		v := &flagValue{o: o, typeName: typeName, val: reflect.New(t).Elem()}
		if err := v.Set(o.def); err != nil {
			panic("config: the default of " + o.key + " does not parse: " + err.Error())
		}
		help := o.usage
		if o.env != "" {
			help += " (env " + o.env + ")"
		}
		f := fs.VarPF(v, o.flag, "", help)
		if t.Kind() == reflect.Bool {
			f.NoOptDefVal = "true"
		}
	}
}

// flagTypes names a Config field's type as pflag names its own flag of that
// type, so pflag's help shows it as for its own flags (float64 as "float", a
// bool without a value) and its typed getters (GetDuration, ...) read it. A
// field of another type needs its entry here and its case in assign.
var flagTypes = map[reflect.Type]string{
	reflect.TypeFor[string]():        "string",
	reflect.TypeFor[bool]():          "bool",
	reflect.TypeFor[int]():           "int",
	reflect.TypeFor[uint32]():        "uint32",
	reflect.TypeFor[float64]():       "float64",
	reflect.TypeFor[time.Duration](): "duration",
}

// fieldTypes maps each option key to the type of its Config field.
func fieldTypes() map[string]reflect.Type {
	types := map[string]reflect.Type{}
	rt := reflect.TypeFor[Config]()
	for i := 0; i < rt.NumField(); i++ {
		if key := rt.Field(i).Tag.Get("key"); key != "" {
			types[key] = rt.Field(i).Type
		}
	}
	return types
}

// flagValue is the pflag.Value of one option's flag.
type flagValue struct {
	o        option
	typeName string
	val      reflect.Value // settable, of the Config field's type
}

func (v *flagValue) String() string { return fmt.Sprint(v.val.Interface()) }

func (v *flagValue) Type() string { return v.typeName }

func (v *flagValue) Set(s string) error {
	parsed := reflect.New(v.val.Type()).Elem()
	if err := assign(parsed, s); err != nil {
		// Worded as decode words a bad value, with the flag as its source.
		return &flagValueError{problem: fmt.Sprintf("%s (flag --%s): %q %v", v.o.key, v.o.flag, s, err)}
	}
	v.val.Set(parsed)
	return nil
}

// flagValueError is a flag value that does not parse, as one problem of a
// validationError.
type flagValueError struct {
	problem string
}

func (e *flagValueError) Error() string { return e.problem }

// FlagError returns, when err is the failure to parse a command line
// because the value of a flag AddFlags registered does not parse, the
// error Load gives for a bad value in any other layer: one line
// naming the option, the flag and what a valid value looks like, instead of
// pflag's `invalid argument "abc" for "--metal-api-qps" flag: ...`. It
// returns nil for any other error.
func FlagError(err error) error {
	var fe *flagValueError
	if errors.As(err, &fe) { // pflag's InvalidValueError unwraps to Set's error
		return &validationError{Problems: []string{fe.problem}}
	}
	return nil
}
