package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/muster-registry/muster/tools/simclient"
)

func TestClientsCmd_rejectsBadArguments(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--servers", "a=ftp://x"}, "--servers"},
		{[]string{"extra"}, `unexpected argument "extra"`},
		{[]string{"--instances", "-1"}, "Instances (-1) must not be negative"},
		{[]string{"--ca-cert", "/nonexistent/ca.pem"}, "--ca-cert"},
		{[]string{"--cert", "/c.pem"}, "--cert and --key go together"},
		{[]string{"--servers", "a=ftp://fleet:s3cret@node-a:8761/eureka/"}, "xxxxx"},
	} {
		var out, errOut bytes.Buffer
		err := clientsCmd(tc.args, &out, &errOut)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%v: error %v, want one mentioning %q", tc.args, err, tc.want)
		}
	}
}

func TestPrintSummary_endsWithOneJSONLineForScripts(t *testing.T) {
	st := simclient.Stats{Instances: 3, Registrations: 3, RenewalsOK: 42, Failovers: 1}
	var out bytes.Buffer
	if err := printSummary(&out, st, 1500*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	last, ok := strings.CutPrefix(lines[len(lines)-1], "summary: ")
	if !ok {
		t.Fatalf("last line %q lacks the summary: prefix", lines[len(lines)-1])
	}
	var back simclient.Stats
	if err := json.Unmarshal([]byte(last), &back); err != nil || back != st {
		t.Fatalf("summary JSON %s = %+v (%v), want %+v", last, back, err, st)
	}
	if !strings.Contains(out.String(), "renewals ok 42") {
		t.Errorf("plain lines lack the renewals:\n%s", out.String())
	}
}
