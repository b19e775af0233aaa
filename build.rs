//! Stamps the commit into `--version`: `CYBEROS_BUILD_COMMIT` when set (builds from a
//! source tarball, or an image build without `.git`), else `git rev-parse`, else
//! `unknown`.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    (out.status.success() && !text.trim().is_empty()).then(|| text.trim().to_owned())
}

fn main() {
    println!("cargo:rerun-if-env-changed=CYBEROS_BUILD_COMMIT");
    let commit = std::env::var("CYBEROS_BUILD_COMMIT")
        .ok()
        .filter(|c| !c.trim().is_empty())
        .or_else(|| git(&["rev-parse", "--short=12", "HEAD"]));
    // Rebuild when HEAD moves: HEAD itself (a branch switch) and the branch it names.
    if let Some(dir) = git(&["rev-parse", "--git-dir"]) {
        println!("cargo:rerun-if-changed={dir}/HEAD");
        if let Some(head) = git(&["symbolic-ref", "-q", "HEAD"]) {
            let common = git(&["rev-parse", "--git-common-dir"]).unwrap_or(dir);
            println!("cargo:rerun-if-changed={common}/{head}");
            println!("cargo:rerun-if-changed={common}/packed-refs");
        }
    }
    println!(
        "cargo:rustc-env=CYBEROS_COMMIT={}",
        commit.as_deref().unwrap_or("unknown")
    );
}
