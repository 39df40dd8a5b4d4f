package cli

import (
	"strconv"
	"unicode/utf8"

	"github.com/tether-dev/tether/internal/drift"
)

// appendFinding appends f as json.MarshalIndent(f, "    ", "  ") writes it
// (an element of the report's findings), without the reflection and the
// second, indenting pass: tens of thousands of findings are most of an
// audit's own time otherwise. FuzzAuditJSON holds it to MarshalIndent
// byte for byte, and TestAppendFinding_knowsEveryField to Finding's fields.
func appendFinding(b []byte, f *drift.Finding) []byte {
	const in1, in2 = "\n      ", "\n        "
	b = append(b, '{')
	b = appendField(b, in1, "id", f.ID, true)
	b = appendField(b, in1, "check", f.Check, true)
	b = appendField(b, in1, "namespace", f.Namespace, true)
	if f.Cluster != "" {
		b = appendField(b, in1, "cluster", f.Cluster, true)
	}
	b = append(b, in1+`"object": {`...)
	b = appendField(b, in2, "kind", f.Object.Kind, true)
	b = appendField(b, in2, "name", f.Object.Name, true)
	b = appendField(b, in2, "uid", string(f.Object.UID), false)
	b = append(b, in1+"},"...)
	b = appendField(b, in1, "volume", f.Volume, true)
	b = appendField(b, in1, "severity", string(f.Severity), true)
	b = appendField(b, in1, "message", f.Message, true)
	b = append(b, in1+`"evidence": `...)
	switch {
	case f.Evidence == nil:
		b = append(b, "null"...)
	case len(f.Evidence) == 0:
		b = append(b, "[]"...)
	default:
		b = append(b, '[')
		for i, e := range f.Evidence {
			b = append(b, in2...)
			b = appendString(b, e)
			if i < len(f.Evidence)-1 {
				b = append(b, ',')
			}
		}
		b = append(b, in1+"]"...)
	}
	b = append(b, ',')
	b = append(b, in1+`"action": {`...)
	b = appendField(b, in2, "type", string(f.Action.Type), true)
	b = append(b, in2+`"safe": `...)
	b = strconv.AppendBool(b, f.Action.Safe)
	b = append(b, ',')
	if f.Action.BlockedBy != "" {
		b = appendField(b, in2, "blockedBy", string(f.Action.BlockedBy), true)
	}
	b = appendField(b, in2, "remedy", f.Action.Remedy, false)
	b = append(b, in1+"}"...)
	return append(b, "\n    }"...)
}

// appendField appends indent, "name": and the JSON string of v, and a
// comma unless last.
func appendField(b []byte, indent, name, v string, comma bool) []byte {
	b = append(b, indent...)
	b = append(b, '"')
	b = append(b, name...)
	b = append(b, `": `...)
	b = appendString(b, v)
	if comma {
		b = append(b, ',')
	}
	return b
}

// appendString appends s as a JSON string the way encoding/json writes one
// (with HTML escaping): '"' and '\\' escaped, \b \f \n \r \t by name, the
// other control characters and <, >, & as \u00XX, U+2028 and U+2029 as
// \u2028 and \u2029, and each byte of invalid UTF-8 as \ufffd.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
