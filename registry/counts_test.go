package registry_test

import (
	"testing"

	"github.com/muster-registry/muster/registry"
)

func TestStatusCounts(t *testing.T) {
	up, down, oos := registry.StatusUp, registry.StatusDown, registry.StatusOutOfService
	tests := []struct {
		name  string
		build func() registry.StatusCounts
		want  string
		total int
	}{
		{"empty", func() registry.StatusCounts { return nil }, "", 0},
		{"statuses in alphabetical order", func() registry.StatusCounts {
			var c registry.StatusCounts
			for _, st := range []registry.Status{up, up, oos, down, up} {
				c.Add(st)
			}
			return c
		}, "DOWN_1_OUT_OF_SERVICE_1_UP_3_", 5},
		{"a status removed to 0 is left out", func() registry.StatusCounts {
			var c registry.StatusCounts
			c.Add(up)
			c.Add(down)
			c.Remove(down)
			return c
		}, "UP_1_", 1},
		{"merge and subtract", func() registry.StatusCounts {
			c := registry.StatusCounts{up: 2, down: 1}
			c.Merge(registry.StatusCounts{up: 1, oos: 2})
			c.Subtract(registry.StatusCounts{down: 1, oos: 1})
			return c
		}, "OUT_OF_SERVICE_1_UP_3_", 4},
		{"counted from apps", func() registry.StatusCounts {
			return registry.CountStatuses([]registry.AppView{
				{Name: "A", Instances: []registry.InstanceView{{Instance: &registry.Instance{Status: up}}, {Instance: &registry.Instance{Status: down}}}},
				{Name: "B", Instances: []registry.InstanceView{{Instance: &registry.Instance{Status: up}}}},
			})
		}, "DOWN_1_UP_2_", 3},
	}
	for _, tt := range tests {
		c := tt.build()
		if got := c.Hashcode(); got != tt.want {
			t.Errorf("%s: Hashcode() = %q, want %q", tt.name, got, tt.want)
		}
		if got := c.Total(); got != tt.total {
			t.Errorf("%s: Total() = %d, want %d", tt.name, got, tt.total)
		}
	}
}

func TestStatusCounts_Clone(t *testing.T) {
	c := registry.StatusCounts{registry.StatusUp: 1}
	d := c.Clone()
	d.Add(registry.StatusUp)
	if c.Hashcode() != "UP_1_" || d.Hashcode() != "UP_2_" {
		t.Errorf("after adding to the clone: %q and %q, want UP_1_ and UP_2_", c.Hashcode(), d.Hashcode())
	}
}
