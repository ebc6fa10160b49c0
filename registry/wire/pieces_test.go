package wire_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/wire"
)

// Pieces survive the trip between Muster nodes whole: every field is set
// here, so a field the wire form forgets fails this test.
func TestPieces_roundTrip(t *testing.T) {
	p := &registry.Pieces{
		RegStatus: registry.StatusDown, Override: registry.StatusOutOfService, OverrideValue: registry.StatusUp,
		OverrideVersion: 7 << 16, HealthVersion: 9 << 16,
		RegMetadata: registry.NewMetadata(map[string]string{"zone": "a", "x": ""}),
		Overlay:     []registry.MetaWrite{{Key: "weight", Value: "5", Version: 8 << 16}},
		Since:       3 << 16,
		DrainedAt:   1_700_000_000_000, DrainedBy: "node-1", DrainVersion: 10 << 16,
	}
	v := reflect.ValueOf(*p)
	for i := range v.NumField() {
		if v.Type().Field(i).IsExported() && v.Field(i).IsZero() {
			t.Fatalf("test leaves %s unset", v.Type().Field(i).Name)
		}
	}
	b, err := json.Marshal(wire.PiecesOf(p))
	if err != nil {
		t.Fatal(err)
	}
	var w wire.Pieces
	if err := json.Unmarshal(b, &w); err != nil {
		t.Fatal(err)
	}
	if got := w.Registry(); !reflect.DeepEqual(got, p) {
		t.Fatalf("round trip:\n got  %+v\n want %+v\n (%s)", got, p, b)
	}
	if wire.PiecesOf(nil) != nil || (*wire.Pieces)(nil).Registry() != nil {
		t.Fatal("nil pieces must stay nil")
	}
}
