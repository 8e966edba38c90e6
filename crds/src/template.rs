//! The `{placeholder}` templates of Persona system prompts (and of the simulator's scripted
//! replies): one scanner for checking and rendering, so what validation accepts is exactly
//! what rendering understands. `{{` and `}}` stand for literal braces.

/// Renders `template`, replacing each `{key}` for which `lookup` has a value. Placeholders
/// without a value, and unmatched braces, are kept as written.
pub fn render(template: &str, mut lookup: impl FnMut(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(i) = rest.find(['{', '}']) {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        if tail.starts_with("{{") || tail.starts_with("}}") {
            out.push_str(&tail[..1]);
            rest = &tail[2..];
            continue;
        }
        if let (true, Some(close)) = (tail.starts_with('{'), tail.find('}')) {
            match lookup(&tail[1..close]) {
                Some(value) => out.push_str(&value),
                None => out.push_str(&tail[..=close]),
            }
            rest = &tail[close + 1..];
        } else {
            out.push_str(&tail[..1]);
            rest = &tail[1..];
        }
    }
    out.push_str(rest);
    out
}

/// Checks that every placeholder of `template` is one of `known` and every brace is
/// matched or escaped; the error says what to fix.
pub fn check(template: &str, known: &[&str]) -> Result<(), String> {
    let mut rest = template;
    while let Some(i) = rest.find(['{', '}']) {
        let tail = &rest[i..];
        if tail.starts_with("{{") || tail.starts_with("}}") {
            rest = &tail[2..];
            continue;
        }
        if tail.starts_with('}') {
            return Err("has an unmatched '}': write '}}' for a literal brace".into());
        }
        let Some(close) = tail.find('}') else {
            return Err("has an unclosed '{': write '{{' for a literal brace".into());
        };
        let name = &tail[1..close];
        if !known.contains(&name) {
            return Err(format!(
                "has unknown placeholder {{{name}}}; known placeholders are {}",
                known.iter().map(|p| format!("{{{p}}}")).collect::<Vec<_>>().join(", ")
            ));
        }
        rest = &tail[close + 1..];
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{check, render};

    const KNOWN: &[&str] = &["name", "date", "memory"];

    #[test]
    fn checks() {
        assert!(check("You are {name}. Today is {date}. {memory}", KNOWN).is_ok());
        assert!(check("JSON looks like {{\"a\": 1}}", KNOWN).is_ok());
        assert!(check("plain", KNOWN).is_ok());
        let e = check("Hi {nmae}", KNOWN).unwrap_err();
        assert!(e.contains("{nmae}") && e.contains("{name}"), "{e}");
        assert!(check("oops {name", KNOWN).unwrap_err().contains("unclosed"));
        assert!(check("oops name}", KNOWN).unwrap_err().contains("unmatched"));
    }

    #[test]
    fn renders() {
        let lookup = |k: &str| (k == "name").then(|| "Ava".to_owned());
        assert_eq!(render("Hi {name}, {{x}} {other} }", lookup), "Hi Ava, {x} {other} }");
        assert_eq!(render("{name", lookup), "{name");
        assert_eq!(render("", lookup), "");
    }
}
