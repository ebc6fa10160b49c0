package httpapi

import (
	"context"
	"fmt"
	"strings"

	"github.com/muster-registry/muster/drain"
)

// consoleDrains is the drainer as the console's Drains: the console knows
// nothing of package drain.
type consoleDrains struct{ d *drain.Drainer }

func (c consoleDrains) Drain(ctx context.Context, app, id string) error {
	_, err := c.d.Drain(ctx, app, id, 0)
	return err
}

func (c consoleDrains) Undrain(ctx context.Context, app, id string) error {
	_, err := c.d.Undrain(ctx, app, id)
	return err
}

func (c consoleDrains) Progress(ctx context.Context, app, id string) (string, bool) {
	rc, err := c.d.Receipt(ctx, app, id)
	if err != nil {
		return err.Error(), false
	}
	text := fmt.Sprintf("%d of %d readers confirmed on %d nodes", rc.Confirmed, rc.Readers, len(rc.Nodes))
	if rc.Complete {
		return text + ", complete", true
	}
	pending := make([]string, 0, min(len(rc.Pending), 5))
	for _, p := range rc.Pending[:min(len(rc.Pending), 5)] {
		pending = append(pending, p.Client+" at "+p.Address+" via "+p.Node)
	}
	if more := len(rc.Pending) - len(pending); more > 0 {
		pending = append(pending, fmt.Sprintf("%d more", more))
	}
	return text + "; pending: " + strings.Join(pending, ", "), false
}
