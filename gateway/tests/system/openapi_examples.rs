//! Every `example` (and `examples`) of the committed `openapi.json` validates against the schema it
//! illustrates: a schema's own example against that schema, a parameter's or a media type's against
//! its `schema`. Client developers copy these examples from the `/docs` page; one that the server
//! would refuse, or that a generated client cannot parse, misleads them. Checked with the
//! `jsonschema` crate (JSON Schema 2020-12, the dialect of OpenAPI 3.1), formats included.

use serde_json::{Value, json};

/// The committed document, which the gateway serves (see `committed_openapi_document_matches_the_code`).
fn committed_document() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../openapi.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// One example found in the document: where it is, the JSON pointer of the schema it must satisfy,
/// and its value.
struct Example {
    at: String,
    schema_pointer: String,
    value: Value,
}

/// A JSON pointer token (RFC 6901), percent-encoded for use in a URI fragment (`{id}` in a path).
fn pointer_token(key: &str) -> String {
    let escaped = key.replace('~', "~0").replace('/', "~1");
    escaped
        .chars()
        .map(|c| match c {
            '{' => "%7B".to_owned(),
            '}' => "%7D".to_owned(),
            '%' => "%25".to_owned(),
            ' ' => "%20".to_owned(),
            other => other.to_string(),
        })
        .collect()
}

/// Collects the examples under `node` (found at `pointer`). An object that holds an example is
/// either a schema (the example illustrates the object itself) or a parameter or media type (it
/// illustrates the object's `schema`). The members of a `properties` map are names, not keywords.
fn collect(node: &Value, pointer: &str, names_only: bool, found: &mut Vec<Example>) {
    match node {
        Value::Object(members) => {
            if !names_only {
                let schema_pointer = if members.contains_key("schema") {
                    format!("{pointer}/schema")
                } else {
                    pointer.to_owned()
                };
                let mut push = |at: String, value: &Value| {
                    found.push(Example {
                        at,
                        schema_pointer: schema_pointer.clone(),
                        value: value.clone(),
                    })
                };
                if let Some(value) = members.get("example") {
                    push(format!("{pointer}/example"), value);
                }
                match members.get("examples") {
                    // JSON Schema's `examples`: a list of values.
                    Some(Value::Array(values)) => {
                        for (i, value) in values.iter().enumerate() {
                            push(format!("{pointer}/examples/{i}"), value);
                        }
                    }
                    // OpenAPI's `examples` of a parameter or media type: named Example objects.
                    Some(Value::Object(named)) => {
                        for (name, example) in named {
                            if let Some(value) = example.get("value") {
                                push(format!("{pointer}/examples/{name}/value"), value);
                            }
                        }
                    }
                    _ => {}
                }
            }
            for (key, child) in members {
                if !names_only && (key == "example" || key == "examples") {
                    continue;
                }
                let child_pointer = format!("{pointer}/{}", pointer_token(key));
                collect(
                    child,
                    &child_pointer,
                    !names_only && key == "properties",
                    found,
                );
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                collect(child, &format!("{pointer}/{i}"), false, found);
            }
        }
        _ => {}
    }
}

/// The errors of `value` against the schema at `schema_pointer` of `document`, whose `$ref`s
/// resolve within the document.
fn violations(document: &Value, schema_pointer: &str, value: &Value) -> Vec<String> {
    let mut root = document.clone();
    root["$schema"] = json!("https://json-schema.org/draft/2020-12/schema");
    root["$ref"] = json!(schema_pointer);
    let validator = jsonschema::options()
        .should_validate_formats(true)
        .build(&root)
        .unwrap_or_else(|error| panic!("{schema_pointer} is no schema: {error}"));
    validator
        .iter_errors(value)
        .map(|error| format!("{} at {}", error, error.instance_path()))
        .collect()
}

#[test]
fn every_example_in_the_document_validates_against_its_schema() {
    let document = committed_document();
    let mut examples = Vec::new();
    collect(&document, "#", false, &mut examples);
    // The document has examples of parameters, properties and whole schemas: a walk that finds
    // none of one kind has lost its way.
    for kind in ["/parameters/", "/properties/", "/components/schemas/"] {
        assert!(
            examples.iter().any(|e| e.at.contains(kind)),
            "no example found under {kind}"
        );
    }
    let failures: Vec<String> = examples
        .iter()
        .flat_map(|example| {
            violations(&document, &example.schema_pointer, &example.value)
                .into_iter()
                .map(move |error| format!("{}: {error}", example.at))
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} examples do not validate:\n{}",
        failures.len(),
        examples.len(),
        failures.join("\n")
    );
}

/// The check above is only as good as the validator's reading of the document: a wrong value
/// for a schema reached through `$ref`s, and a malformed `date-time`, must be refused.
#[test]
fn the_example_check_refuses_what_the_schemas_refuse() {
    let document = committed_document();
    let xp = "#/components/schemas/Xp";
    let good = document["components"]["schemas"]["Xp"]["example"].clone();
    assert!(violations(&document, xp, &good).is_empty());
    let mut wrong_type = good.clone();
    wrong_type["total_xp"] = json!("80");
    assert!(!violations(&document, xp, &wrong_type).is_empty());
    let session = "#/components/schemas/StudySession";
    let mut bad_time = document["components"]["schemas"]["StudySession"]["example"].clone();
    bad_time["created_at"] = json!("yesterday");
    assert!(!violations(&document, session, &bad_time).is_empty());
}
