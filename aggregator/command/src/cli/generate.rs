//! `kern-profile completions SHELL` and `kern-profile man`: generated from the clap
//! definitions, so they never disagree with `--help`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Args, CommandFactory};
use clap_complete::Shell;

use crate::Cli;

/// Print a shell completion script
///
/// bash: `kern-profile completions bash > ~/.local/share/bash-completion/completions/kern-profile`;
/// zsh: into a directory of $fpath as `_kern-profile`; fish: into
/// ~/.config/fish/completions/kern-profile.fish.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell
    #[arg(value_enum)]
    shell: Shell,
}

/// Print the manual page (roff), or write one page per command into a directory
///
/// `kern-profile man | man -l -` reads it.
#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write kern-profile.1, kern-profile-record.1, ... into DIR instead
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
}

pub fn completions(a: CompletionsArgs) -> Result<ExitCode> {
    let mut cmd = Cli::command();
    clap_complete::generate(a.shell, &mut cmd, "kern-profile", &mut std::io::stdout());
    Ok(ExitCode::SUCCESS)
}

pub fn man(a: ManArgs) -> Result<ExitCode> {
    let cmd = Cli::command();
    match a.dir {
        Some(dir) => {
            std::fs::create_dir_all(&dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            clap_mangen::generate_to(cmd, &dir)
                .with_context(|| format!("cannot write the pages into {}", dir.display()))?;
        }
        None => clap_mangen::Man::new(cmd)
            .render(&mut std::io::stdout())
            .context("cannot write the page")?,
    }
    Ok(ExitCode::SUCCESS)
}
