package wire_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"testing"
	"testing/iotest"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/wire"
)

var streamSeeds = []string{
	`{"applications":{"versions__delta":"1","apps__hashcode":"UP_1_","application":[{"name":"A","instance":[{"instanceId":"i-1","hostName":"h","app":"A","ipAddr":"1.2.3.4","status":"UP","port":{"$":8080,"@enabled":"true"}}]}]}}`,
	`{"applications":{"application":{"name":"A","instance":{"port":8080}}}}`,
	` { "x" : [1, {"a":"}"}], "applications" : { "y":"\"]", "application" : [ ] } } `,
	`{"applications":{"application":null}}`,
	`{"applications":{"application":5}}`,
	`{"applications":{"application":[5]}}`,
	`{"applications":null}`,
	`{"applications":{}}`,
	`{"applications":{"application":[{"name":"A"},{"name":"B\u00e9"}],"application":[{"name":"C"}]}}`,
	`{"applications":{"application":[{"name":"A"}]}} x`,
	`{"applications":{"application":[{"name":"A"}]}`,
	`{"applications":{"application":[{"name":"A"},]}}`,
	`{"applications":{"application":[{"name":"A" "x"}]}}`,
	`{"other":{}}`,
	`{"applications":{"application":[{"name":"A"}]},"x":tru}`,
	`[]`,
	``,
}

// streamApps reads data with ReadApplicationsJSON, through r's wrapping.
func streamApps(data []byte, wrap func(io.Reader) io.Reader) ([]registry.AppView, error) {
	var apps []registry.AppView
	err := wire.ReadApplicationsJSON(wrap(bytes.NewReader(data)), func(a registry.AppView) error {
		apps = append(apps, a)
		return nil
	})
	return apps, err
}

// checkStreamMatches fails when ReadApplicationsJSON and
// DecodeApplicationsJSON disagree on a document with the applications
// wrapper: both accept it with the same apps, or both refuse it.
func checkStreamMatches(t *testing.T, data []byte) {
	t.Helper()
	var root map[string]json.RawMessage
	if json.Unmarshal(data, &root) == nil {
		if _, single := root["application"]; single {
			return // {"application":…}, GET /apps/{APP}'s document, which only the whole-document decoder takes
		}
	}
	whole, werr := wire.DecodeApplicationsJSON(data)
	for name, wrap := range map[string]func(io.Reader) io.Reader{
		"whole":  func(r io.Reader) io.Reader { return r },
		"1 byte": iotest.OneByteReader,
		"half":   iotest.HalfReader,
	} {
		apps, err := streamApps(data, wrap)
		if (err == nil) != (werr == nil) {
			t.Fatalf("%s: stream error %v, whole-document error %v: %q", name, err, werr, data)
		}
		if err != nil {
			if !errors.Is(err, wire.ErrMalformed) {
				t.Fatalf("%s: error %v does not wrap ErrMalformed", name, err)
			}
			continue
		}
		if len(apps) != len(whole.Apps) || len(apps) > 0 && !reflect.DeepEqual(apps, whole.Apps) {
			t.Fatalf("%s: stream read %+v, whole document %+v: %q", name, apps, whole.Apps, data)
		}
	}
}

func TestReadApplicationsJSON_readsAsDecodeApplicationsJSON(t *testing.T) {
	for _, s := range streamSeeds {
		checkStreamMatches(t, []byte(s))
	}
	for _, name := range []string{"full.golden.json", "delta.golden.json", "empty.golden.json"} {
		checkStreamMatches(t, mustReadFile(t, name))
	}
}

func TestReadApplicationsJSON_stopsAtEachsError(t *testing.T) {
	stop := errors.New("stop")
	n := 0
	err := wire.ReadApplicationsJSON(bytes.NewReader(mustReadFile(t, "full.golden.json")), func(registry.AppView) error {
		n++
		return stop
	})
	if !errors.Is(err, stop) || n != 1 {
		t.Fatalf("error %v after %d apps", err, n)
	}
}

func TestReadApplicationsJSON_reportsTheReadersError(t *testing.T) {
	boom := errors.New("boom")
	data := mustReadFile(t, "full.golden.json")
	r := io.MultiReader(bytes.NewReader(data[:len(data)/2]), iotest.ErrReader(boom))
	if err := wire.ReadApplicationsJSON(r, func(registry.AppView) error { return nil }); !errors.Is(err, boom) {
		t.Fatalf("error %v, want the reader's", err)
	}
}

func FuzzReadApplicationsJSON(f *testing.F) {
	for _, s := range streamSeeds {
		f.Add([]byte(s))
	}
	f.Add(mustReadFile(f, "full.golden.json"))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkStreamMatches(t, data)
	})
}
