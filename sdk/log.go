package sdk

import "fmt"

// Level is a log level for Logf.
type Level int32

// Log levels, mapped by the host onto klog (Debug is verbosity 4).
const (
	LevelDebug Level = 0
	LevelInfo  Level = 1
	LevelWarn  Level = 2
	LevelError Level = 3
)

func (l Level) String() string {
	switch l {
	case LevelDebug:
		return "DEBUG"
	case LevelInfo:
		return "INFO"
	case LevelWarn:
		return "WARN"
	default:
		return "ERROR"
	}
}

// Logf writes a line to the CCM's log, tagged with the module's name. The
// host caps the size and number of lines per call. Never log a Peer's
// Password: a Secret formats as [redacted] with fmt, but a string you
// converted yourself does not.
func Logf(level Level, format string, args ...any) {
	writeLog(level, fmt.Sprintf(format, args...))
}
