package settings

import (
	"sort"
	"strings"
)

// EffectiveSettings are key, value (secrets masked) and origin of every
// setting, then of the map entries set (zones, metadata, users).
func EffectiveSettings(s *Settings, rep *Report) [][3]string {
	origin := func(key string) string {
		o, ok := s.origin[key]
		if !ok {
			return "default"
		}
		if notes := rep.resolved[key]; len(notes) > 0 {
			masked := make([]string, len(notes))
			for i, n := range notes {
				masked[i] = maskNote(key, n)
			}
			o += " (" + strings.Join(masked, "; ") + ")"
		}
		return o
	}
	var rows [][3]string
	for _, st := range settings {
		if st.format == nil {
			continue
		}
		value := st.format(s)
		if _, set := s.origin[st.Key]; !set && st.unsetDefault != "" {
			value = st.unsetDefault // read only when set: its field's value means nothing
		}
		rows = append(rows, [3]string{st.Key, maskSecret(st.Key, value), origin(st.Key)})
	}
	var mapped []string
	for key := range s.origin {
		for _, p := range mapPrefixes {
			if strings.HasPrefix(key, p) {
				mapped = append(mapped, key)
			}
		}
	}
	sort.Strings(mapped)
	for _, key := range mapped {
		rows = append(rows, [3]string{key, maskSecret(key, s.raw[key]), origin(key)})
	}
	return rows
}

// SettingDoc is one key Muster reads, its default as a user writes it
// ("" when it has none) and what it does.
type SettingDoc struct{ Key, Default, Help string }

// SettingDocs lists every key, in docs/configuration.md's order.
func SettingDocs() []SettingDoc {
	docs := make([]SettingDoc, len(settings))
	for i, st := range settings {
		docs[i] = SettingDoc{st.Key, st.Default, st.Help}
	}
	return docs
}
