package wasmhost

// Reason classifies a module failure, for metrics and events. The runtime
// produces the reasons below; a host adds its own for what happens around
// the call (the CCM: apply, snapshot).
type Reason string

const (
	ReasonTrap            Reason = "trap"
	ReasonDeadline        Reason = "deadline"
	ReasonMemory          Reason = "memory"
	ReasonModuleError     Reason = "module_error"
	ReasonInvalidOutput   Reason = "invalid_output"
	ReasonForbiddenOutput Reason = "forbidden_output"
)

// Error is a failed module call. Its message is one line that names the
// module and says what to do; it never holds a BGP password.
type Error struct {
	Module string
	Reason Reason
	Msg    string
}

func (e *Error) Error() string { return "load-balancer module " + e.Module + " " + e.Msg }
