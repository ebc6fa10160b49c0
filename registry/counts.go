package registry

import (
	"slices"
	"strconv"
)

// StatusCounts counts instances per status: what Eureka's apps hashcode
// (Applications#getReconcileHashCode) is made of. The zero value is empty
// and ready to use (Add allocates). A status whose count falls to 0 is
// removed, so two counts of the same instances are equal maps, and a
// count that is read and shared (Snapshot.Counts, a view's) is not
// changed again.
type StatusCounts map[Status]int

// CountStatuses counts the instances of apps.
func CountStatuses(apps []AppView) StatusCounts {
	var c StatusCounts
	for _, app := range apps {
		for _, iv := range app.Instances {
			c.Add(iv.Status)
		}
	}
	return c
}

// Add counts one instance of status st.
func (c *StatusCounts) Add(st Status) { c.add(st, 1) }

// Remove uncounts one instance of status st.
func (c *StatusCounts) Remove(st Status) { c.add(st, -1) }

// Merge adds every count of o.
func (c *StatusCounts) Merge(o StatusCounts) {
	for st, n := range o {
		c.add(st, n)
	}
}

// Subtract takes every count of o away.
func (c *StatusCounts) Subtract(o StatusCounts) {
	for st, n := range o {
		c.add(st, -n)
	}
}

func (c *StatusCounts) add(st Status, n int) {
	if *c == nil {
		*c = make(StatusCounts, 2)
	}
	if v := (*c)[st] + n; v != 0 {
		(*c)[st] = v
	} else {
		delete(*c, st)
	}
}

// Clone returns a copy that shares nothing with c.
func (c StatusCounts) Clone() StatusCounts {
	out := make(StatusCounts, len(c))
	for st, n := range c {
		out[st] = n
	}
	return out
}

// Total is the number of instances counted.
func (c StatusCounts) Total() int {
	n := 0
	for _, v := range c {
		n += v
	}
	return n
}

// Hashcode is Eureka's reconcile hash (Applications#getReconcileHashCode):
// instance counts per status, statuses in alphabetical order, each written
// as STATUS_count_, e.g. "DOWN_1_UP_3_"; "" for no instances.
func (c StatusCounts) Hashcode() string {
	names := make([]string, 0, len(c))
	for st, n := range c {
		if n > 0 {
			names = append(names, string(st))
		}
	}
	slices.Sort(names)
	var b []byte
	for _, name := range names {
		b = append(b, name...)
		b = append(b, '_')
		b = strconv.AppendInt(b, int64(c[Status(name)]), 10)
		b = append(b, '_')
	}
	return string(b)
}
