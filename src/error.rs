//! Crate-wide error helpers: [`display_chain`], the one-line form of an error and its causes
//! that log lines and the command line print (every layer uses it).

/// `error: cause: cause ...`, walking `source()`: one line for logs and the command line.
pub fn display_chain(err: &dyn std::error::Error) -> String {
    let mut s = err.to_string();
    let mut cur = err.source();
    while let Some(e) = cur {
        let text = e.to_string();
        // Some layers repeat their cause in their own text; do not print it twice.
        if !s.ends_with(&text) {
            s.push_str(": ");
            s.push_str(&text);
        }
        cur = e.source();
    }
    s
}
