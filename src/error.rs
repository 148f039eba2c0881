//! Crate-wide error helpers: [`display_chain`], the one-line form of an error and its causes
//! that log lines and the command line print (every layer uses it).

/// `error: cause: cause ...`, walking `source()`: one line for logs and the command line.
pub fn display_chain(err: &dyn std::error::Error) -> String {
    let mut s = err.to_string();
    let mut cur = err.source();
    while let Some(e) = cur {
        let mut text = e.to_string();
        // A cause that starts with the path the text before already quotes (`cannot open
        // '/x': /x: not a ...`) drops it: each path is printed once.
        if let Some((head, rest)) = text.split_once(": ")
            && !head.is_empty()
            && s.contains(&format!("'{head}'"))
        {
            text = rest.to_owned();
        }
        // Some layers repeat their cause in their own text; do not print it twice.
        if !s.ends_with(&text) {
            s.push_str(": ");
            s.push_str(&text);
        }
        cur = e.source();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::display_chain;

    #[derive(Debug, thiserror::Error)]
    #[error("cannot open '{0}'")]
    struct Outer(&'static str, #[source] Inner);

    #[derive(Debug, thiserror::Error)]
    #[error("{0}: not a Blosc2 frame")]
    struct Inner(&'static str);

    #[test]
    fn a_quoted_path_is_printed_once() {
        let e = Outer("/d/notes.txt", Inner("/d/notes.txt"));
        assert_eq!(
            display_chain(&e),
            "cannot open '/d/notes.txt': not a Blosc2 frame"
        );
        // A cause naming another path keeps it.
        let e = Outer("/d/t", Inner("/d/t/col/meta/sizes"));
        assert_eq!(
            display_chain(&e),
            "cannot open '/d/t': /d/t/col/meta/sizes: not a Blosc2 frame"
        );
    }
}
