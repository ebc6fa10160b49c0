package wire

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"github.com/muster-registry/muster/registry"
)

// A peer's batch under load is 250 heartbeats, each a handful of short
// ASCII strings and a timestamp. Read with encoding/json (validate the
// body, split it into raw items, unmarshal each by reflection) it cost the
// receiver ~7 µs per item, as much as a fifth of a client's whole HTTP
// heartbeat; this reads the same body in one pass and decodes such items
// without reflection. Whatever it is not sure about goes to encoding/json:
// an item with a field it does not know, a value with escapes, non-ASCII
// bytes, a fraction or a type it does not expect (item by item), and a
// body of any other shape (as a whole), so every answer, error or not, is
// the one encoding/json gives.

// itemField is how the scanner sets one field of ReplicationItem.
type itemField struct {
	index int
	kind  itemFieldKind
}

type itemFieldKind uint8

const (
	fieldString  itemFieldKind = iota + 1 // string
	fieldFlexInt                          // *FlexInt: integer, numeric string or null
	fieldObject                           // json.RawMessage holding an object
	fieldInt                              // a signed integer type
	fieldUint                             // an unsigned integer type
)

// itemFields maps ReplicationItem's JSON names to its fields, from the
// struct tags, so a field added there is read here too when its type is
// one of the kinds above (other types go to encoding/json).
var itemFields = func() map[string]itemField {
	out := map[string]itemField{}
	t := reflect.TypeFor[ReplicationItem]()
	flex, raw := reflect.TypeFor[*FlexInt](), reflect.TypeFor[json.RawMessage]()
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		var kind itemFieldKind
		switch {
		case f.Type == flex:
			kind = fieldFlexInt
		case f.Type == raw:
			kind = fieldObject
		case f.Type.Kind() == reflect.String:
			kind = fieldString
		case f.Type.Kind() >= reflect.Int && f.Type.Kind() <= reflect.Int64:
			kind = fieldInt
		case f.Type.Kind() >= reflect.Uint && f.Type.Kind() <= reflect.Uint64:
			kind = fieldUint
		default:
			continue
		}
		out[name] = itemField{index: i, kind: kind}
	}
	return out
}()

// scanBatch reads {"replicationList":[item, …]}. ok is false when the
// body has another shape or is not valid JSON: DecodeBatch then leaves it
// all to encoding/json. Items the scanner is not sure about are read by
// encoding/json, one by one, once the whole body has been scanned.
//
// What a batch of heartbeats leaves behind is kept small, as a peer sends
// tens of them a second: the items' slice comes from a pool (Release puts
// it back), the actions, statuses and an app name repeated from the item
// before are not copied again, and the timestamps share one allocation.
func scanBatch(body []byte) (b *InboundBatch, ok bool) {
	sc := NewScanner(body)
	if !sc.Byte('{') || !sc.Key("replicationList") || !sc.Byte('[') {
		return nil, false
	}
	type rawItem struct {
		i   int
		raw []byte
	}
	var raws []rawItem
	pooled := batchItems.Get().(*[]ReplicationItem)
	items := (*pooled)[:0]
	st := scanState{}
	fail := func() (*InboundBatch, bool) {
		releaseItems(pooled, items)
		return nil, false
	}
	if !sc.Byte(']') {
		for {
			start := sc.Pos()
			items = append(items, ReplicationItem{})
			if !scanItem(&sc, &items[len(items)-1], &st) {
				sc.Seek(start)
				raw, ok := sc.SkipValue()
				if !ok || !json.Valid(raw) {
					return fail()
				}
				items[len(items)-1] = ReplicationItem{}
				raws = append(raws, rawItem{i: len(items) - 1, raw: raw})
			}
			if sc.Byte(',') {
				continue
			}
			if !sc.Byte(']') {
				return fail()
			}
			break
		}
	}
	if !sc.Byte('}') || !sc.AtEnd() {
		return fail()
	}
	b = &InboundBatch{Items: items, viaJSON: len(raws), pooled: pooled}
	for _, r := range raws {
		if err := json.Unmarshal(r.raw, &b.Items[r.i]); err != nil {
			b.setErr(r.i, err)
		}
	}
	return b, true
}

// batchItems holds item slices for scanBatch (InboundBatch.Release).
var batchItems = sync.Pool{New: func() any { s := make([]ReplicationItem, 0, 256); return &s }}

// releaseItems clears items (nothing they point to stays reachable) and
// puts the slice back, unless it grew unusually large.
func releaseItems(p *[]ReplicationItem, items []ReplicationItem) {
	if cap(items) > 4096 {
		return
	}
	clear(items)
	*p = items[:0]
	batchItems.Put(p)
}

// scanState is what scanItem carries from one item to the next.
type scanState struct {
	lastApp []byte // the previous item's appName, and its string
	app     string
	dirty   []FlexInt // room for the next lastDirtyTimestamps
}

// word returns s as a string, without copying the actions and statuses
// of the wire.
func word(s []byte) string {
	switch string(s) {
	case string(registry.ActionHeartbeat):
		return string(registry.ActionHeartbeat)
	case string(registry.ActionRegister):
		return string(registry.ActionRegister)
	case string(registry.ActionCancel):
		return string(registry.ActionCancel)
	case string(registry.ActionStatusUpdate):
		return string(registry.ActionStatusUpdate)
	case string(registry.ActionDeleteStatusOverride):
		return string(registry.ActionDeleteStatusOverride)
	case string(registry.StatusUp):
		return string(registry.StatusUp)
	case string(registry.StatusDown):
		return string(registry.StatusDown)
	case string(registry.StatusStarting):
		return string(registry.StatusStarting)
	case string(registry.StatusOutOfService):
		return string(registry.StatusOutOfService)
	case string(registry.StatusUnknown):
		return string(registry.StatusUnknown)
	}
	return string(s)
}

// scanItem decodes one item object; false sends it to encoding/json.
func scanItem(sc *Scanner, it *ReplicationItem, st *scanState) bool {
	if !sc.Byte('{') {
		return false
	}
	if sc.Byte('}') {
		return true
	}
	for {
		k, ok := sc.PlainString()
		if !ok || !sc.Byte(':') || !scanItemField(sc, it, k, st) {
			return false
		}
		switch {
		case sc.Byte(','):
		case sc.Byte('}'):
			return true
		default:
			return false
		}
	}
}

// scanItemField reads the value of key k into it: the fields of a
// heartbeat by name, any other by the table (itemFields), as scanField
// would.
func scanItemField(sc *Scanner, it *ReplicationItem, k []byte, st *scanState) bool {
	var dst *string
	switch string(k) {
	case "appName":
		s, ok := sc.PlainString()
		if ok {
			if st.lastApp == nil || !bytes.Equal(s, st.lastApp) {
				st.lastApp, st.app = s, string(s)
			}
			it.AppName = st.app
		}
		return ok
	case "id":
		dst = &it.ID
	case "version":
		// By name, not by the table: every item of a Muster peer has one.
		text, ok := sc.Integer()
		if !ok {
			return false
		}
		n, small := smallDigits(text)
		if !small {
			v, err := strconv.ParseUint(string(text), 10, 64)
			if err != nil {
				return false
			}
			n = v
		}
		it.Version = n
		return true
	case "action":
		dst = &it.Action
	case "status":
		dst = &it.Status
	case "overriddenStatus":
		dst = &it.OverriddenStatus
	case "lastDirtyTimestamp":
		if sc.Peek() == 'n' {
			if !sc.Literal("null") {
				return false
			}
			it.LastDirtyTimestamp = nil
			return true
		}
		n, ok := scanFlexInt(sc)
		if !ok {
			return false
		}
		if len(st.dirty) == 0 {
			st.dirty = make([]FlexInt, 64)
		}
		st.dirty[0] = FlexInt(n)
		it.LastDirtyTimestamp = &st.dirty[0]
		st.dirty = st.dirty[1:]
		return true
	default:
		f, known := itemFields[string(k)]
		return known && scanField(sc, reflect.ValueOf(it).Elem().Field(f.index), f.kind)
	}
	s, ok := sc.PlainString()
	if ok {
		if dst == &it.ID {
			*dst = string(s)
		} else {
			*dst = word(s)
		}
	}
	return ok
}

// scanFlexInt reads what FlexInt takes: an integer, or one quoted (only
// digits inside).
func scanFlexInt(sc *Scanner) (int64, bool) {
	var text []byte
	var ok bool
	if sc.Peek() == '"' {
		if text, ok = sc.PlainString(); ok {
			inner := NewScanner(text)
			_, ok = inner.Integer()
			ok = ok && inner.Pos() == len(text)
		}
	} else {
		text, ok = sc.Integer()
	}
	if !ok {
		return 0, false
	}
	if n, ok := smallDigits(text); ok {
		return int64(n), true
	}
	n, err := strconv.ParseInt(string(text), 10, 64)
	return n, err == nil
}

// smallDigits returns the value of text when it is 1 to 18 decimal digits
// with no sign, which no 64-bit integer overflows with; false leaves the
// rest to strconv. Every heartbeat carries two such integers (its
// lastDirtyTimestamp and version), and strconv first wants a string.
func smallDigits(text []byte) (uint64, bool) {
	if len(text) == 0 || len(text) > 18 {
		return 0, false
	}
	var n uint64
	for _, c := range text {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	return n, true
}

func scanField(sc *Scanner, dst reflect.Value, kind itemFieldKind) bool {
	switch kind {
	case fieldString:
		s, ok := sc.PlainString()
		if ok {
			dst.SetString(string(s))
		}
		return ok
	case fieldFlexInt:
		if sc.Peek() == 'n' {
			ok := sc.Literal("null")
			if ok {
				dst.SetZero()
			}
			return ok
		}
		n, ok := scanFlexInt(sc)
		if !ok {
			return false
		}
		f := FlexInt(n)
		dst.Set(reflect.ValueOf(&f))
		return true
	case fieldObject:
		if sc.Peek() != '{' {
			return false
		}
		raw, ok := sc.SkipValue()
		if !ok || !json.Valid(raw) {
			return false
		}
		dst.SetBytes(raw)
		return true
	case fieldInt, fieldUint:
		text, ok := sc.Integer()
		if !ok {
			return false
		}
		if kind == fieldInt {
			n, err := strconv.ParseInt(string(text), 10, dst.Type().Bits())
			if err != nil {
				return false
			}
			dst.SetInt(n)
			return true
		}
		n, err := strconv.ParseUint(string(text), 10, dst.Type().Bits())
		if err != nil {
			return false
		}
		dst.SetUint(n)
		return true
	}
	return false
}

// appendBatchResponse writes a ReplicationListResponse as json.Marshal
// does (responseEntity is already compact JSON). A field added to
// ReplicationResponse must be added here: a test fills every field.
func appendBatchResponse(b []byte, items []ReplicationResponse) []byte {
	b = append(b, `{"responseList":[`...)
	for i, r := range items {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"statusCode":`...)
		b = strconv.AppendInt(b, int64(r.StatusCode), 10)
		if len(r.ResponseEntity) > 0 {
			b = append(b, `,"responseEntity":`...)
			b = append(b, r.ResponseEntity...)
		}
		if r.Version != 0 {
			b = append(b, `,"version":`...)
			b = strconv.AppendUint(b, r.Version, 10)
		}
		if r.Health != nil {
			// Rare (a 409 of a marked instance): encoding/json writes it.
			h, err := json.Marshal(r.Health)
			if err == nil {
				b = append(b, `,"health":`...)
				b = append(b, h...)
			}
		}
		if r.Pieces != nil {
			// Rare too (a 409 of an instance with an override, metadata
			// writes or a mark).
			p, err := json.Marshal(r.Pieces)
			if err == nil {
				b = append(b, `,"pieces":`...)
				b = append(b, p...)
			}
		}
		b = append(b, '}')
	}
	return append(b, "]}"...)
}

// The sender's side: a batch of heartbeats is encoded and its answer
// decoded once per peer, so both skip reflection too. Fields are written
// from the same table as above, in struct order and with omitempty as
// encoding/json does; an item with a field of another type, or a string
// that needs escaping, is written by encoding/json.

// itemOrder is ReplicationItem's fields in struct order, for encoding.
var itemOrder = func() []itemEncField {
	var out []itemEncField
	t := reflect.TypeFor[ReplicationItem]()
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		kind := itemFieldKind(0)
		if k, ok := itemFields[name]; ok && k.index == i {
			kind = k.kind
		}
		out = append(out, itemEncField{index: i, key: `"` + name + `":`, kind: kind, omitEmpty: strings.Contains(","+opts+",", ",omitempty,")})
	}
	return out
}()

type itemEncField struct {
	index     int
	key       string
	kind      itemFieldKind // 0: a type only encoding/json writes
	omitEmpty bool
}

// appendItem appends it as encoding/json would write it (same fields,
// same order; strings needing escapes and other types through
// encoding/json). An item without instanceInfo, health or pieces (a
// heartbeat, a cancel: nearly every item under load) is written field by
// field without reflection; the others take appendItemReflect. Neither
// keeps it: the item stays on its caller's stack.
func appendItem(b []byte, it *ReplicationItem) ([]byte, error) {
	if it.InstanceInfo != nil || it.Health != nil || it.Pieces != nil {
		cp := *it
		return appendItemReflect(b, &cp)
	}
	if !plainASCII(it.AppName) || !plainASCII(it.ID) || !plainASCII(it.OverriddenStatus) ||
		!plainASCII(it.Status) || !plainASCII(it.Action) {
		cp := *it
		return appendItemJSON(b, &cp)
	}
	// ReplicationItem's fields in struct order, omitempty as tagged
	// (TestAppendItem_plainWritesEveryField fails when a field is added
	// and not written here).
	b = append(b, `{"appName":"`...)
	b = append(b, it.AppName...)
	b = append(b, `","id":"`...)
	b = append(b, it.ID...)
	b = append(b, '"')
	if it.LastDirtyTimestamp != nil {
		b = append(b, `,"lastDirtyTimestamp":`...)
		b = strconv.AppendInt(b, int64(*it.LastDirtyTimestamp), 10)
	}
	if it.OverriddenStatus != "" {
		b = append(b, `,"overriddenStatus":"`...)
		b = append(b, it.OverriddenStatus...)
		b = append(b, '"')
	}
	if it.Status != "" {
		b = append(b, `,"status":"`...)
		b = append(b, it.Status...)
		b = append(b, '"')
	}
	b = append(b, `,"action":"`...)
	b = append(b, it.Action...)
	b = append(b, '"')
	if it.Version != 0 {
		b = append(b, `,"version":`...)
		b = strconv.AppendUint(b, it.Version, 10)
	}
	if it.LeaseDurationInSecs != 0 {
		b = append(b, `,"leaseDurationInSecs":`...)
		b = strconv.AppendUint(b, uint64(it.LeaseDurationInSecs), 10)
	}
	return append(b, '}'), nil
}

// appendItemReflect is appendItem for any item, by the field table.
func appendItemReflect(b []byte, it *ReplicationItem) ([]byte, error) {
	v := reflect.ValueOf(it).Elem()
	start := len(b)
	b = append(b, '{')
	first := true
	for _, f := range itemOrder {
		fv := v.Field(f.index)
		if f.omitEmpty && (fv.IsZero() || fv.Kind() == reflect.Slice && fv.Len() == 0) {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, f.key...)
		switch f.kind {
		case fieldString:
			s := fv.String()
			if !plainASCII(s) {
				return appendItemJSON(b[:start], it)
			}
			b = append(b, '"')
			b = append(b, s...)
			b = append(b, '"')
		case fieldFlexInt:
			if fv.IsNil() {
				b = append(b, "null"...)
			} else {
				b = strconv.AppendInt(b, int64(*fv.Interface().(*FlexInt)), 10)
			}
		case fieldInt:
			b = strconv.AppendInt(b, fv.Int(), 10)
		case fieldUint:
			b = strconv.AppendUint(b, fv.Uint(), 10)
		case fieldObject:
			raw := fv.Bytes()
			switch {
			case len(raw) == 0:
				b = append(b, "null"...)
			case !json.Valid(raw):
				return appendItemJSON(b[:start], it) // its error
			default:
				b = append(b, raw...)
			}
		default:
			return appendItemJSON(b[:start], it)
		}
	}
	return append(b, '}'), nil
}

func appendItemJSON(b []byte, it *ReplicationItem) ([]byte, error) {
	j, err := json.Marshal(it)
	return append(b, j...), err
}

func plainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// scanBatchResponse reads a ReplicationListResponse whose items carry only
// a status code, which is what a peer answers when nothing conflicts;
// false for anything else (a 409's entity, another shape), which
// DecodeBatchResponse leaves to encoding/json.
func scanBatchResponse(body []byte) ([]ItemResult, bool) {
	sc := NewScanner(body)
	if !sc.Byte('{') || !sc.Key("responseList") || !sc.Byte('[') {
		return nil, false
	}
	out := make([]ItemResult, 0, len(body)/len(`{"statusCode":200},`)+1)
	if !sc.Byte(']') {
		for {
			if !sc.Byte('{') || !sc.Key("statusCode") {
				return nil, false
			}
			text, ok := sc.Integer()
			if !ok || !sc.Byte('}') {
				return nil, false
			}
			code, err := strconv.Atoi(string(text))
			if err != nil {
				return nil, false
			}
			out = append(out, ItemResult{StatusCode: code})
			if sc.Byte(',') {
				continue
			}
			if !sc.Byte(']') {
				return nil, false
			}
			break
		}
	}
	if !sc.Byte('}') {
		return nil, false
	}
	return out, sc.AtEnd()
}
