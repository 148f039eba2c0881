//! `b2fs completions SHELL` and `b2fs man`: a shell completion script and the man page,
//! generated from the clap definitions ([`super::args::Cli`]) by clap_complete and
//! clap_mangen, so they never drift from `--help`.

use std::io::Write;

use clap::CommandFactory;

use super::Error;
use super::args::Cli;

/// Prints the completion script for `shell` on stdout.
pub(super) fn completions(shell: clap_complete::Shell) -> Result<(), Error> {
    let mut cmd = Cli::command();
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, "b2fs", &mut out);
    write_stdout(&out)
}

/// Prints the man page (roff) of `b2fs` and its subcommands on stdout.
pub(super) fn man() -> Result<(), Error> {
    let cmd = Cli::command();
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd.clone())
        .render(&mut out)
        .map_err(|e| Error::other("cannot render the man page", e))?;
    // One page: the subcommands follow as sections of their own.
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("b2fs {}", sub.get_name());
        out.extend_from_slice(format!(".SH \"{}\"\n", name.to_uppercase()).as_bytes());
        let mut page = Vec::new();
        let m = clap_mangen::Man::new(sub.clone().bin_name(name));
        m.render_synopsis_section(&mut page)
            .and_then(|()| m.render_description_section(&mut page))
            .and_then(|()| m.render_options_section(&mut page))
            .and_then(|()| m.render_extra_section(&mut page))
            .map_err(|e| Error::other("cannot render the man page", e))?;
        out.extend_from_slice(&demote_sections(&page));
    }
    write_stdout(&out)
}

/// A subcommand's `.SH` sections become `.SS` subsections of its own section.
fn demote_sections(roff: &[u8]) -> Vec<u8> {
    String::from_utf8_lossy(roff)
        .lines()
        .map(|l| match l.strip_prefix(".SH ") {
            Some(rest) => format!(".SS {rest}\n"),
            None => format!("{l}\n"),
        })
        .collect::<String>()
        .into_bytes()
}

fn write_stdout(bytes: &[u8]) -> Result<(), Error> {
    let mut out = std::io::stdout().lock();
    out.write_all(bytes)
        .and_then(|()| out.flush())
        .map_err(|e| Error::other("cannot write to stdout", e))
}
