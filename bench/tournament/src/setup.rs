//! Getting a manifest's competitors ready: tools, setup, build, version.
//!
//! For each manifest, in order:
//!
//! 1. Every `requires` executable must be on PATH. When some are missing and installing is
//!    allowed (root, no `--no-install`), `apt-get update` runs once per tournament and
//!    `apt-get install -y` installs the manifest's `apt` packages; apt waits up to 10 minutes
//!    for the dpkg lock, since other engineers may be running apt on the same machine.
//! 2. `setup` steps run when `setup_creates` is missing (or always, when it is not declared).
//! 3. `build` steps run every time.
//! 4. `version` runs and its first line is recorded for the report.
//!
//! Any failure ends the manifest's setup with a [`Failure`] that the report turns into a
//! "could not run" row for each of its competitors. Nothing here aborts the tournament.
//!
//! Under `--no-install` no package is installed and every step runs with the package clients
//! told to stay offline (`GOPROXY=off`, `PIP_NO_INDEX=1`, `CARGO_NET_OFFLINE=true`,
//! `npm_config_offline=true`), so a step that would download fails
//! and says so instead.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::manifest::{Manifest, Step};
use crate::proc::{self, Failure};
use crate::sys;
use crate::ui::Ui;

/// Time limit of one apt-get call (includes waiting for the dpkg lock).
const APT_TIMEOUT: Duration = Duration::from_secs(1800);
/// Time limit of one setup step.
const SETUP_TIMEOUT: Duration = Duration::from_secs(1800);
/// Time limit of one build step (a cold Rust build of tonic on 2 cores takes minutes).
const BUILD_TIMEOUT: Duration = Duration::from_secs(3600);
/// Time limit of the version command.
const VERSION_TIMEOUT: Duration = Duration::from_secs(60);

/// The environment that keeps package clients offline under `--no-install`.
pub fn offline_env() -> Vec<(String, String)> {
    [("GOPROXY", "off"), ("PIP_NO_INDEX", "1"), ("CARGO_NET_OFFLINE", "true"), ("npm_config_offline", "true")]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Installs and builds, remembering what it did across manifests.
pub struct Installer {
    install: bool,
    root: bool,
    env: Vec<(String, String)>,
    apt_updated: bool,
}

impl Installer {
    /// An installer; `install` is false under `--no-install`.
    pub fn new(install: bool) -> Installer {
        Installer {
            install,
            root: sys::is_root(),
            env: if install { Vec::new() } else { offline_env() },
            apt_updated: false,
        }
    }

    /// The environment added to every step and run.
    pub fn env(&self) -> &[(String, String)] {
        &self.env
    }

    /// Makes sure every executable in `requires` is on PATH, installing `apt` if allowed.
    pub fn ensure_tools(
        &mut self,
        requires: &[String],
        apt: &[String],
        dir: &Path,
        ui: &Ui,
    ) -> Result<(), Failure> {
        let missing = |names: &[String]| -> Vec<String> {
            names.iter().filter(|n| proc::which(n, dir).is_none()).cloned().collect()
        };
        let absent = missing(requires);
        if absent.is_empty() {
            return Ok(());
        }
        let names = absent.join(", ");
        if apt.is_empty() {
            return Err(Failure::new(
                format!("missing on PATH: {names} (no apt package is named to install)"),
                "",
            ));
        }
        self.apt_install(&format!("missing on PATH: {names}"), apt, ui)?;
        let still = missing(requires);
        if !still.is_empty() {
            return Err(Failure::new(
                format!(
                    "still missing on PATH after apt-get install {}: {}",
                    apt.join(" "),
                    still.join(", ")
                ),
                "",
            ));
        }
        Ok(())
    }

    /// Installs the Debian packages `apt` (step 1 of the module doc) for what `missing` says
    /// is lacking; fails, saying so, under `--no-install`, without root, or when apt fails.
    pub fn apt_install(&mut self, missing: &str, apt: &[String], ui: &Ui) -> Result<(), Failure> {
        let packages = apt.join(" ");
        if !self.install {
            return Err(Failure::new(format!("{missing} (--no-install: not installing {packages})"), ""));
        }
        if !self.root {
            return Err(Failure::new(format!("{missing} (not root: cannot apt-get install {packages})"), ""));
        }
        if !self.apt_updated {
            self.apt_updated = true;
            ui.busy("apt-get update");
            let mut cmd = apt_command(&["update"]);
            match proc::run(&mut cmd, APT_TIMEOUT) {
                Ok(done) if done.exit.success() => {}
                // A failed update may still leave usable package lists: go on and try.
                Ok(done) => ui.log(&format!("apt-get update {}", done.exit.describe())),
                Err(e) => ui.log(&format!("cannot run apt-get update: {e}")),
            }
        }
        ui.busy(&format!("apt-get install {packages}"));
        let mut args = vec!["install", "-y", "--no-install-recommends"];
        args.extend(apt.iter().map(String::as_str));
        let mut cmd = apt_command(&args);
        let done = proc::run(&mut cmd, APT_TIMEOUT)
            .map_err(|e| Failure::new(format!("cannot run apt-get: {e}"), ""))?;
        if !done.exit.success() {
            return Err(Failure::new(
                format!("apt-get install {packages} {}", done.exit.describe()),
                done.stderr,
            ));
        }
        Ok(())
    }

    /// Steps 1–4 of the module doc; returns the toolchain's version line.
    pub fn prepare(&mut self, manifest: &Manifest, ui: &Ui) -> Result<String, Failure> {
        let label = manifest_label(manifest);
        self.ensure_tools(&manifest.requires, &manifest.apt, &manifest.dir, ui)?;
        let created = manifest.setup_creates.as_ref().is_some_and(|p| manifest.dir.join(p).exists());
        if !manifest.setup.is_empty() && !created {
            for (i, step) in manifest.setup.iter().enumerate() {
                ui.busy(&format!("{label}: setup {}/{}", i + 1, manifest.setup.len()));
                self.step("setup step", step, &manifest.dir, SETUP_TIMEOUT)?;
            }
            if let Some(path) = &manifest.setup_creates {
                if !manifest.dir.join(path).exists() {
                    return Err(Failure::new(format!("setup ran but did not create `{path}`"), ""));
                }
            }
        }
        for (i, step) in manifest.build.iter().enumerate() {
            ui.busy(&format!("{label}: build {}/{}", i + 1, manifest.build.len()));
            self.step("build step", step, &manifest.dir, BUILD_TIMEOUT)?;
        }
        match &manifest.version {
            None => Ok("(no version command)".to_string()),
            Some(step) => {
                let done = self.step("version command", step, &manifest.dir, VERSION_TIMEOUT)?;
                Ok(first_line(&done.stdout)
                    .or_else(|| first_line(&done.stderr))
                    .unwrap_or("(version printed nothing)")
                    .to_string())
            }
        }
    }

    fn step(
        &self,
        what: &str,
        step: &Step,
        dir: &Path,
        timeout: Duration,
    ) -> Result<proc::Finished, Failure> {
        let mut cmd = proc::command(step, dir);
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
        let done = proc::run(&mut cmd, timeout)
            .map_err(|e| Failure::new(format!("cannot run {what} {}: {e}", proc::show(step)), ""))?;
        if !done.exit.success() {
            let output = if done.stderr.trim().is_empty() { &done.stdout } else { &done.stderr };
            return Err(Failure::new(
                format!("{what} {} {}", proc::show(step), done.exit.describe()),
                output,
            ));
        }
        Ok(done)
    }
}

fn apt_command(args: &[&str]) -> Command {
    let mut cmd = Command::new("apt-get");
    cmd.args(["-o", "DPkg::Lock::Timeout=600"]).args(args).env("DEBIAN_FRONTEND", "noninteractive");
    cmd
}

fn first_line(text: &str) -> Option<&str> {
    text.lines().map(str::trim).find(|l| !l.is_empty())
}

/// "Go (fibers)": how the progress display names a manifest.
pub fn manifest_label(manifest: &Manifest) -> String {
    format!("{} ({})", manifest.language, manifest.suite)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest;
    use std::fs;
    use std::path::PathBuf;

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("tournament-setup-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn manifest_in(dir: &Path, body: &str) -> Manifest {
        let path = dir.join("tcp.peer.toml");
        let text = format!(
            "language = \"Shell\"\nsuite = \"tcp\"\n{body}\n[[competitor]]\nname = \"c-syscalls\"\nrun = [\"true\"]\n"
        );
        manifest::parse(&text, &path).unwrap()
    }

    #[test]
    fn runs_setup_once_build_always_and_records_the_version() {
        let dir = temp_dir("ok");
        let m = manifest_in(
            &dir,
            r#"requires = ["sh"]
setup = [["sh", "-c", "echo x >> setup.log; touch made"]]
setup_creates = "made"
build = [["sh", "-c", "echo y >> build.log"]]
version = ["sh", "-c", "echo; echo 'shell 1.2'; echo more"]"#,
        );
        let mut installer = Installer::new(false);
        assert_eq!(installer.prepare(&m, &Ui::hidden()).unwrap(), "shell 1.2");
        assert_eq!(installer.prepare(&m, &Ui::hidden()).unwrap(), "shell 1.2");
        assert_eq!(fs::read_to_string(dir.join("setup.log")).unwrap(), "x\n");
        assert_eq!(fs::read_to_string(dir.join("build.log")).unwrap(), "y\ny\n");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_failing_build_keeps_its_stderr_tail() {
        let dir = temp_dir("build");
        let m = manifest_in(&dir, r#"build = [["sh", "-c", "echo 'error: oops' >&2; exit 2"]]"#);
        let failure = Installer::new(false).prepare(&m, &Ui::hidden()).unwrap_err();
        assert!(failure.what.contains("build step"), "{}", failure.what);
        assert!(failure.what.contains("exited with status 2"));
        assert_eq!(failure.stderr, "error: oops");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn missing_tools_are_not_installed_under_no_install() {
        let dir = temp_dir("missing");
        let m = manifest_in(
            &dir,
            r#"requires = ["no-such-tool-9c1e"]
apt = ["no-such-package"]"#,
        );
        let failure = Installer::new(false).prepare(&m, &Ui::hidden()).unwrap_err();
        assert!(failure.what.contains("no-such-tool-9c1e"));
        assert!(failure.what.contains("--no-install"));
        let no_apt = manifest_in(&dir, r#"requires = ["no-such-tool-9c1e"]"#);
        let failure = Installer::new(true).prepare(&no_apt, &Ui::hidden()).unwrap_err();
        assert!(failure.what.contains("no apt package"));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn setup_that_does_not_create_its_marker_fails() {
        let dir = temp_dir("marker");
        let m = manifest_in(
            &dir,
            r#"setup = [["true"]]
setup_creates = "never""#,
        );
        let failure = Installer::new(false).prepare(&m, &Ui::hidden()).unwrap_err();
        assert!(failure.what.contains("did not create `never`"));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn no_install_steps_see_the_offline_environment() {
        let dir = temp_dir("offline");
        let m = manifest_in(&dir, r#"version = ["sh", "-c", "echo $GOPROXY $PIP_NO_INDEX"]"#);
        assert_eq!(Installer::new(false).prepare(&m, &Ui::hidden()).unwrap(), "off 1");
        fs::remove_dir_all(&dir).unwrap();
    }
}
