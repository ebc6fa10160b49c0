// Package logging builds the zerolog loggers of Muster's commands (the
// server and the tools), so every process logs the same way: JSON lines
// with millisecond timestamps, or a console format on a terminal.
package logging

import (
	"io"
	"os"

	"github.com/rs/zerolog"
)

func init() {
	// Milliseconds in every log line: the chaos scenarios (and operators)
	// line events of different nodes and clients up by them.
	zerolog.TimeFieldFormat = "2006-01-02T15:04:05.000Z07:00"
}

// New logs to w at level (info when it does not parse): as a
// human-readable console when format is "console", or "auto" on a
// terminal; as JSON lines otherwise.
func New(w io.Writer, level, format string) zerolog.Logger {
	lvl, err := zerolog.ParseLevel(level)
	if err != nil {
		lvl = zerolog.InfoLevel
	}
	if format == "console" || (format == "auto" && isTerminal(w)) {
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: "15:04:05.000"}
	}
	return zerolog.New(w).Level(lvl).With().Timestamp().Logger()
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
