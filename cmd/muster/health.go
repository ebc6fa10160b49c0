package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"time"
)

// healthCmd probes a node's /readyz and exits non-zero unless it answers
// 200, so container healthchecks work in an image without a shell or curl.
// It prints the body, so with --url it doubles as a GET for scripts
// (docker exec NODE /muster health --url http://127.0.0.1:8761/admin/status).
func healthCmd(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("health", flag.ContinueOnError)
	url := fs.String("url", "http://127.0.0.1:8761/readyz", "URL to probe")
	timeout := fs.Duration("timeout", 3*time.Second, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	client := &http.Client{Timeout: *timeout}
	resp, err := client.Get(*url)
	if err != nil {
		return fmt.Errorf("health: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("health: %s answered %d: %.200s", *url, resp.StatusCode, body)
	}
	fmt.Fprintf(stdout, "%s", body)
	return nil
}
