package main

import (
	"io"
	"os"

	"github.com/rs/zerolog"
)

func init() {
	// Milliseconds in every log line: the chaos scenarios (and operators)
	// line events of different nodes up by them.
	zerolog.TimeFieldFormat = "2006-01-02T15:04:05.000Z07:00"
}

// newLogger logs to w: as a human-readable console on a terminal, as JSON
// lines otherwise (or as format says).
func newLogger(w io.Writer, level, format string) zerolog.Logger {
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
