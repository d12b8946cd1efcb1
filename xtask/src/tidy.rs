//! Architecture checks over `cargo metadata`: the crate graph is the architecture, so its directions are tested.

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::process::Command;

    /// Workspace packages and the workspace packages each depends on (normal dependencies only).
    fn workspace_graph() -> BTreeMap<String, Vec<String>> {
        let output = Command::new(env!("CARGO"))
            .args(["metadata", "--format-version", "1", "--no-deps", "--offline"])
            .current_dir(super::super::workspace_root())
            .output()
            .expect("cargo metadata runs");
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        let metadata: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        let packages = metadata["packages"].as_array().unwrap();
        let names: Vec<&str> = packages.iter().map(|p| p["name"].as_str().unwrap()).collect();
        packages
            .iter()
            .map(|p| {
                let deps = p["dependencies"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|d| d["kind"].is_null())
                    .map(|d| d["name"].as_str().unwrap())
                    .filter(|d| names.contains(d))
                    .map(str::to_owned)
                    .collect();
                (p["name"].as_str().unwrap().to_owned(), deps)
            })
            .collect()
    }

    #[test]
    fn crate_dependencies_point_the_right_way() {
        let graph = workspace_graph();
        assert!(graph.contains_key("infertrace-adapter-traces"), "{graph:?}");
        for (package, deps) in &graph {
            let allowed: &[&str] = match package.as_str() {
                "infertrace-schema" => &[],
                "infertrace-adapter" => &["infertrace-schema"],
                p if p.starts_with("infertrace-adapter-") => &["infertrace-adapter", "infertrace-schema"],
                "infertrace-engine" => &["infertrace-query", "infertrace-schema"],
                "infertrace-query" => &["infertrace-schema"],
                "infertrace-synth" => &["infertrace-schema"],
                "infertrace-export" => &["infertrace-schema"],
                "infertrace-cache" => &["infertrace-schema"],
                "infertrace-report" => &["infertrace-engine", "infertrace-schema"],
                "infertrace-model" => &[],
                "infertrace-replay" => &["infertrace-model", "infertrace-schema", "infertrace-cache"],
                // The CLI and xtask wire everything together.
                "infertrace" | "xtask" => continue,
                other => panic!("{other} is a new workspace package: add its allowed dependencies here"),
            };
            for dep in deps {
                assert!(allowed.contains(&dep.as_str()), "{package} must not depend on {dep}");
            }
        }
    }
}
