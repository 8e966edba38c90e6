//! Helpers the API crate's integration tests share.

use switchboard_crds::{Catalog, Problem};

/// A catalog of YAML documents, named `doc0`, `doc1`, ... in errors.
pub fn catalog(docs: &[&str]) -> Catalog {
    let mut c = Catalog::new();
    for (i, d) in docs.iter().enumerate() {
        c.add_yaml(d, &format!("doc{i}")).unwrap_or_else(|e| panic!("doc{i}: {e}"));
    }
    c
}

/// The problems of the first Agent of `docs`.
pub fn problems(docs: &[&str]) -> Vec<Problem> {
    let c = catalog(docs);
    let agent = c.agents().next().expect("an agent");
    c.validate_agent(agent)
}
