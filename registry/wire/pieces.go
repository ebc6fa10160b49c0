package wire

import "github.com/muster-registry/muster/registry"

// Pieces is registry.Pieces between Muster nodes (peer batches, their
// answers, anti-entropy copies, the data-dir snapshot): beside an instance
// body, whose Eureka JSON has no place for it. Eureka clients and Java
// peers never see it. Decode it with encoding/json.
type Pieces struct {
	RegStatus       string      `json:"regStatus,omitempty"`
	Override        string      `json:"override,omitempty"`
	OverrideValue   string      `json:"overrideValue,omitempty"`
	OverrideVersion uint64      `json:"overrideVersion,omitempty"`
	HealthVersion   uint64      `json:"healthVersion,omitempty"`
	RegMetadata     [][2]string `json:"regMetadata,omitempty"`
	Overlay         []MetaWrite `json:"overlay,omitempty"`
	Since           uint64      `json:"since,omitempty"`
	DrainedAt       int64       `json:"drainedAt,omitempty"`
	DrainedBy       string      `json:"drainedBy,omitempty"`
	DrainVersion    uint64      `json:"drainVersion,omitempty"`
}

// MetaWrite is registry.MetaWrite on the wire.
type MetaWrite struct {
	Key     string `json:"k"`
	Value   string `json:"v"`
	Version uint64 `json:"ver"`
}

// PiecesOf is p's wire form; nil for nil.
func PiecesOf(p *registry.Pieces) *Pieces {
	if p == nil {
		return nil
	}
	w := &Pieces{
		RegStatus: string(p.RegStatus), Override: string(p.Override), OverrideValue: string(p.OverrideValue),
		OverrideVersion: p.OverrideVersion, HealthVersion: p.HealthVersion, Since: p.Since,
		DrainedAt: p.DrainedAt, DrainedBy: p.DrainedBy, DrainVersion: p.DrainVersion,
	}
	for _, kv := range p.RegMetadata {
		w.RegMetadata = append(w.RegMetadata, [2]string{kv.Key, kv.Value})
	}
	for _, m := range p.Overlay {
		w.Overlay = append(w.Overlay, MetaWrite{Key: m.Key, Value: m.Value, Version: m.Version})
	}
	return w
}

// Registry is w as registry.Pieces (nil for nil). Statuses are read
// leniently, as in instance bodies; the registry derives what clients see
// from the result, so nothing here can make an instance inconsistent.
func (w *Pieces) Registry() *registry.Pieces {
	if w == nil {
		return nil
	}
	p := &registry.Pieces{
		RegStatus: registry.LenientStatus(w.RegStatus), Override: registry.LenientStatus(w.Override),
		OverrideVersion: w.OverrideVersion, HealthVersion: w.HealthVersion, Since: w.Since,
		DrainVersion: w.DrainVersion, DrainedBy: w.DrainedBy,
	}
	if w.DrainedAt > 0 {
		p.DrainedAt = w.DrainedAt
	}
	if w.Override == "" {
		p.Override = registry.StatusUnknown
	}
	if w.OverrideValue != "" {
		p.OverrideValue = registry.LenientStatus(w.OverrideValue)
	}
	if len(w.RegMetadata) > 0 {
		md := make(map[string]string, len(w.RegMetadata))
		for _, kv := range w.RegMetadata {
			md[kv[0]] = kv[1]
		}
		p.RegMetadata = registry.NewMetadata(md)
	}
	for _, m := range w.Overlay {
		p.Overlay = append(p.Overlay, registry.MetaWrite{Key: m.Key, Value: m.Value, Version: m.Version})
	}
	return p
}
