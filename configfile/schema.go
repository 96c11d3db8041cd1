package configfile

import (
	"bytes"
	"encoding/json"

	"github.com/polygateway/polygateway/internal/config"
)

// SchemaID is the $id of the JSON Schema Schema returns.
const SchemaID = "https://github.com/polygateway/polygateway/docs/polygateway.schema.json"

// Schema returns the JSON Schema (draft 2020-12) of a configuration file,
// generated from the same key table as the parser, for editors (e.g. a
// "# yaml-language-server: $schema=…" comment). It is committed as
// docs/polygateway.schema.json. The schema is a guide: Parse is the
// authority (it also accepts numbers written as strings, case-insensitive
// enumerations and 1/0 booleans, as the environment does). A value holding
// ${NAME} is accepted wherever a scalar is.
func Schema() []byte {
	schema := obj{
		"$schema":              "https://json-schema.org/draft/2020-12/schema",
		"$id":                  SchemaID,
		"title":                "PolyGateway configuration file",
		"description":          "Generated from the key table of internal/config (see docs/howto-config-file.md). Every field is the lower-cased tail of an environment key.",
		"type":                 "object",
		"additionalProperties": false,
		"properties": obj{
			"assembly": assemblySchema(),
			"defaults": closed(props(&shape.defaults), "The flat LLM_* shortcuts: fallbacks for every scope."),
			"scopes": obj{"type": "object", "description": "The scopes, by name (upper-cased into the keys).",
				"propertyNames":        obj{"pattern": "^[A-Za-z](?:[A-Za-z0-9]|_[A-Za-z0-9])*$"},
				"additionalProperties": obj{"$ref": "#/$defs/scope"}},
			"server": closed(props(&shape.server), "The gateway's keys (cmd/polygateway)."),
		},
		"$defs": obj{
			"interpolated": obj{"type": "string", "pattern": "\\$\\{[A-Za-z_][A-Za-z0-9_]*\\}",
				"description": "A value taken from an environment variable: ${NAME}."},
			"scope":  scopeSchema(),
			"source": sourceSchema(),
		},
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	_ = enc.Encode(schema) // static maps of strings, numbers and slices: cannot fail
	return b.Bytes()
}

// obj is a JSON object of the schema.
type obj = map[string]any

// scopeSchema is the schema of one scope: its fields, groups and sources.
func scopeSchema() obj {
	scopeProps := props(&shape.scope)
	for _, g := range shape.groups.order {
		scopeProps[g] = closed(props(shape.groups.byName[g]), "The "+shape.groups.key[g]+" keys ({SCOPE}__"+shape.groups.key[g]+"__…).")
	}
	scopeProps[fieldSources] = obj{"type": "array", "items": obj{"$ref": "#/$defs/source"},
		"description": "The scope's sources. A source's N is its position among the sources of the same provider: the first openai entry is OPENAI__1 (openai_1)."}
	scope := closed(scopeProps, "One scope: its keys ({SCOPE}__…) and sources.")
	scope["patternProperties"] = obj{"^[xX]_[A-Za-z0-9]+(_[A-Za-z0-9]+)*$": obj{"type": []any{"string", "number", "boolean"},
		"description": "A key for your own code: kept in GatewaySettings.Extra, never checked ({SCOPE}__X_…)."}}
	return scope
}

// sourceSchema is the schema of one source of a scope.
func sourceSchema() obj {
	sourceProps := props(&shape.source)
	for _, g := range shape.sourceGroups.order {
		key := shape.sourceGroups.key[g]
		sourceProps[g] = closed(props(shape.sourceGroups.byName[g]),
			"This source's own "+key+" keys ({SCOPE}__{PROVIDER}__{N}__"+key+"__…), in place of the scope's.")
	}
	sourceProps[fieldProvider] = obj{"type": "string", "pattern": "^[A-Za-z0-9](?:[A-Za-z0-9]|_[A-Za-z0-9])*$",
		"description": "The provider's name (upper-cased into the keys): openai, deepseek, qwen, …"}
	source := closed(sourceProps, "One source ({SCOPE}__{PROVIDER}__{N}__…).")
	var required []any
	required = append(required, fieldProvider)
	for _, f := range shape.source.fields {
		if f.doc.Required == "yes" {
			required = append(required, f.name)
		}
	}
	source["required"] = required
	return source
}

// assemblySchema is the schema of the assembly section.
func assemblySchema() obj {
	assembly := closed(props(&shape.assembly), "How clients are assembled: the PGW_* assembly keys and REDIS_URL, shared by every scope.")
	var asmRequired []any
	for _, f := range shape.assembly.fields {
		if f.doc.Required == "yes" {
			asmRequired = append(asmRequired, f.name)
		}
	}
	assembly["required"] = asmRequired
	return assembly
}

// props is the properties object of the fields of sec.
func props(sec *section) obj {
	p := obj{}
	for _, f := range sec.fields {
		p[f.name] = valueSchema(f)
	}
	return p
}

// closed is an object schema with properties p and no others.
func closed(p obj, desc string) obj {
	return obj{"type": "object", "additionalProperties": false, "properties": p, "description": desc}
}

// valueSchema is the schema of the value of field f: its kind's forms,
// or null (~ or nothing, the same as leaving the field out).
func valueSchema(f field) obj {
	d := f.doc
	desc := d.Meaning
	if d.Default != "" {
		desc += " Default: " + d.Default + "."
	}
	if d.Required != "" {
		desc += " Required: " + d.Required + "."
	}
	null := obj{"type": "null"}
	return obj{"anyOf": append(valueForms(f), null), "description": desc + " (" + d.Pattern + ")"}
}

// valueForms lists the forms a value of field f may take.
func valueForms(f field) []any {
	interp := obj{"$ref": "#/$defs/interpolated"}
	num := func(typ string, bounds obj) []any {
		out := obj{"type": typ}
		for k, v := range bounds {
			out[k] = v
		}
		return []any{out, interp}
	}
	d := f.doc
	switch f.kind {
	case config.KindSecondsPos, config.KindDecimalPos:
		return num("number", obj{"exclusiveMinimum": 0})
	case config.KindSecondsNonNeg, config.KindDecimalNonNeg:
		return num("number", obj{"minimum": 0})
	case config.KindFraction:
		return num("number", obj{"exclusiveMinimum": 0, "maximum": 1})
	case config.KindUnit:
		return num("number", obj{"minimum": 0, "maximum": 1})
	case config.KindInt:
		return num("integer", nil)
	case config.KindIntNonNeg:
		return num("integer", obj{"minimum": 0})
	case config.KindIntPos:
		return num("integer", obj{"minimum": 1})
	case config.KindBool:
		return []any{obj{"type": "boolean"}, interp}
	case config.KindEnum:
		return []any{obj{"enum": d.Values}, interp}
	case config.KindBackend:
		return []any{obj{"enum": d.Values}, obj{"type": "string", "description": "a backend registered by name"}}
	case config.KindName:
		return []any{obj{"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$"}, interp}
	case config.KindJSON:
		return []any{obj{"type": "object"}, obj{"type": "string"}}
	case config.KindList:
		return []any{obj{"type": "array", "items": obj{"type": "string"}}, obj{"type": "string"}}
	case config.KindRoutes:
		return []any{obj{"type": "object", "additionalProperties": obj{"type": "string", "pattern": "^[A-Za-z](?:[A-Za-z0-9]|_[A-Za-z0-9])*$|\\$\\{"}}}
	}
	return []any{obj{"type": "string"}}
}
