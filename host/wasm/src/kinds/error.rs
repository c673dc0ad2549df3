//! Why a component could not become a plugin, or a call into it failed.

use seam_core::types::PluginKind;
use thiserror::Error;

use crate::fault::GuestFault;

/// Why a component could not become a plugin, or a call into it failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PluginError {
    /// The component imports something its world's linker does not provide.
    #[error("cannot link the {kind} component: {reason}")]
    Link {
        /// The component's kind.
        kind: PluginKind,
        /// Which import the host lacks or has in another form (boxed: it is rare, and large
        /// next to the other variants).
        reason: Box<LinkFailure>,
    },
    /// A fresh instance could not be made.
    #[error("cannot instantiate: {0}")]
    Instantiate(GuestFault),
    /// The guest answered a call with an error of its own.
    #[error("{call} refused the config: {message}")]
    Refused {
        /// The export called (`describe`, `bind`).
        call: &'static str,
        /// The guest's message.
        message: String,
    },
    /// The guest answered a call (an observer's `on-event`) with an error of its own.
    #[error("{call} returned an error: {message}")]
    Answered {
        /// The export called.
        call: &'static str,
        /// The guest's message.
        message: String,
    },
    /// The guest faulted during a call.
    #[error("{call} failed: {fault}")]
    Fault {
        /// The export called.
        call: &'static str,
        /// What happened.
        fault: GuestFault,
    },
    /// The guest's answer breaks the contract (too large, empty, not JSON).
    #[error("{call} returned {problem}")]
    Malformed {
        /// The export called.
        call: &'static str,
        /// What is wrong with it.
        problem: String,
    },
}

/// Why the linker refused a component: an import this host does not provide, one it provides in
/// another form, or another refusal in the linker's words.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum LinkFailure {
    /// The component's version of the package has no world of its kind (a kind exists from
    /// the version that adds its world).
    #[error("seam:plugin@{version} has no `{kind}` world")]
    NoWorld {
        /// The version the component was built against.
        version: crate::versions::WitVersion,
        /// The kind it exports.
        kind: seam_core::types::PluginKind,
    },
    /// The component imports an interface, or a function of one, that this host does not
    /// provide.
    #[error("{}", missing(.instance, .function.as_deref()))]
    Missing {
        /// The interface imported (`seam:plugin/run-context@0.1.0`).
        instance: String,
        /// The function of it that is missing, when the linker names one.
        function: Option<String>,
    },
    /// The component imports an interface this host provides, in another form (a function of
    /// another type).
    #[error("{}", wrong_type(.instance, .function.as_deref(), .detail))]
    WrongType {
        /// The interface imported.
        instance: String,
        /// The function whose type differs, when the linker names one.
        function: Option<String>,
        /// How it differs, in the linker's words.
        detail: String,
    },
    /// Any other refusal, in the linker's words on one line.
    #[error("{0}")]
    Other(String),
}

fn missing(instance: &str, function: Option<&str>) -> String {
    match function {
        Some(f) => {
            format!("needs `{instance}` (its function `{f}`), which this host does not provide")
        }
        None => format!("needs `{instance}`, which this host does not provide"),
    }
}

fn wrong_type(instance: &str, function: Option<&str>, detail: &str) -> String {
    match function {
        Some(f) => format!(
            "imports `{instance}` with function `{f}` of another type than this host's: {detail}"
        ),
        None => format!("imports `{instance}` in a form this host does not provide: {detail}"),
    }
}

impl LinkFailure {
    /// Any wasmtime error met while linking, on one line.
    pub fn other(e: &wasmtime::Error) -> Self {
        Self::Other(crate::fault::one_line(&format!("{e:#}")))
    }

    /// Reads a component linker's refusal (`Linker::instantiate_pre`).
    ///
    /// The one place that reads wasmtime's wording of a link failure (listed in ARCHITECTURE.md,
    /// "Matches on other programs' wording"): wasmtime 48 builds these errors from text alone
    /// (`bail!("function implementation is missing")` under the contexts ``component imports
    /// instance `X`, but a matching implementation was not found in the linker`` and
    /// ``instance export `f` has the wrong type``), with no type to downcast to. Text it does
    /// not recognise is [`LinkFailure::Other`], so a change of wording loses the plugin author
    /// the summary, never the cause; the unit tests below pin the wording against wasmtime's
    /// own linker.
    pub fn from_linker(e: &wasmtime::Error) -> Self {
        let text = crate::fault::one_line(&format!("{e:#}"));
        let between = |s: &str, start: &str, end: &str| {
            let from = s.find(start)? + start.len();
            let to = from + s[from..].find(end)?;
            Some(s[from..to].to_string())
        };
        let Some(instance) = between(&text, "component imports instance `", "`") else {
            return Self::Other(text);
        };
        let function = between(&text, "instance export `", "`");
        if text.contains("implementation is missing")
            || (text.contains("was not found") && function.is_none())
        {
            return Self::Missing { instance, function };
        }
        let detail = text
            .rsplit_once("has the wrong type: ")
            .map_or(text.as_str(), |(_, d)| d)
            .to_string();
        Self::WrongType {
            instance,
            function,
            detail,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmtime::component::{Component, Linker};
    use wasmtime::Engine;

    /// A component that imports instance `name` with one function `f` taking `params` (each a
    /// `u32`) and returning nothing, in the component binary format (no `wat` here).
    fn importing(name: &str, params: &[&str]) -> Vec<u8> {
        fn string(out: &mut Vec<u8>, s: &str) {
            out.push(u8::try_from(s.len()).unwrap());
            out.extend(s.as_bytes());
        }
        fn section(out: &mut Vec<u8>, id: u8, body: Vec<u8>) {
            out.push(id);
            out.push(u8::try_from(body.len()).unwrap());
            out.extend(body);
        }
        let mut bytes = b"\0asm\x0d\0\x01\0".to_vec();
        // One instance type: `(type (func (param ...)))` and `(export "f" (func (type 0)))`.
        let mut types = vec![1, 0x42, 2, 0x01, 0x40, u8::try_from(params.len()).unwrap()];
        for p in params {
            string(&mut types, p);
            types.push(0x79); // u32
        }
        types.extend([0x01, 0x00]); // no results
        types.extend([0x04, 0x00]);
        string(&mut types, "f");
        types.extend([0x01, 0]);
        section(&mut bytes, 7, types);
        // `(import "name" (instance (type 0)))`.
        let mut imports = vec![1, 0x00];
        string(&mut imports, name);
        imports.extend([0x05, 0]);
        section(&mut bytes, 10, imports);
        bytes
    }

    /// What this host's linker, providing `seam:test/present@1.0.0` with `f: func()`, says of
    /// `component`.
    fn refusal(component: &[u8]) -> LinkFailure {
        let engine = Engine::default();
        let mut linker = Linker::<()>::new(&engine);
        linker
            .instance("seam:test/present@1.0.0")
            .unwrap()
            .func_wrap("f", |_, (): ()| Ok(()))
            .unwrap();
        let component = Component::new(&engine, component).unwrap();
        match linker.instantiate_pre(&component) {
            Ok(_) => panic!("the linker accepted it"),
            Err(e) => LinkFailure::from_linker(&e),
        }
    }

    #[test]
    fn an_import_the_host_lacks_is_missing() {
        let failure = refusal(&importing("seam:test/absent@1.0.0", &[]));
        assert_eq!(
            failure,
            LinkFailure::Missing {
                instance: "seam:test/absent@1.0.0".into(),
                function: Some("f".into()),
            }
        );
        assert_eq!(
            failure.to_string(),
            "needs `seam:test/absent@1.0.0` (its function `f`), which this host does not provide"
        );
    }

    #[test]
    fn a_function_of_another_type_is_a_wrong_type() {
        let failure = refusal(&importing("seam:test/present@1.0.0", &["x"]));
        let LinkFailure::WrongType {
            instance,
            function,
            detail,
        } = &failure
        else {
            panic!("{failure:?}");
        };
        assert_eq!(instance, "seam:test/present@1.0.0");
        assert_eq!(function.as_deref(), Some("f"));
        assert!(!detail.is_empty() && !detail.contains('\n'), "{detail}");
        assert!(
            failure.to_string().starts_with(
                "imports `seam:test/present@1.0.0` with function `f` of another type than this \
                 host's: "
            ),
            "{failure}"
        );
    }

    #[test]
    fn a_refusal_of_unknown_wording_is_passed_on() {
        let e = wasmtime::Error::msg("something else").context("while linking");
        assert_eq!(
            LinkFailure::from_linker(&e),
            LinkFailure::Other("while linking: something else".into())
        );
    }
}
