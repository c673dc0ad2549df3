//! The tool registry (contract section 5): tools follow the provider they are bound to, and a
//! tool name is taken once.

use std::sync::Arc;
use std::time::Duration;

use seam_core::tool::ToolError;
use seam_core::{Capabilities, Event, ParentRef};
use tokio_util::sync::CancellationToken;

use super::support::*;

fn mounted(core: &Core) -> Vec<String> {
    core.tools.list().into_iter().map(|t| t.name).collect()
}

fn tool_events(core: &Core) -> Vec<String> {
    core.log
        .all()
        .into_iter()
        .filter_map(|e| match e {
            Event::ToolMounted { name, .. } => Some(format!("+{name}")),
            Event::ToolUnmounted { name, .. } => Some(format!("-{name}")),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_tool_follows_its_provider_whatever_the_loading_order() {
    let core = Core::new(Duration::from_millis(100));
    let echo = Echo::new("echo-plugin", "delegate");
    // Loaded before its provider: it waits.
    core.tools
        .add_plugin(echo.binding(Some("p")), echo.clone())
        .await
        .unwrap();
    assert!(mounted(&core).is_empty());
    let waiting = core.tools.unmounted().await;
    assert_eq!(waiting.len(), 1);
    assert_eq!(
        (waiting[0].plugin.as_str(), waiting[0].provider.as_deref()),
        ("echo-plugin", Some("p"))
    );
    assert_eq!(
        core.tools
            .execute(
                "delegate",
                ParentRef::top_level("a", "/"),
                "{}".into(),
                CancellationToken::new()
            )
            .await
            .unwrap_err(),
        ToolError::NotMounted("delegate".into())
    );

    // Another provider's arrival changes nothing.
    core.register("q", Capabilities::default(), Fake::answering("x"));
    core.tools.provider_added("q").await;
    assert!(mounted(&core).is_empty());

    core.register("p", Capabilities::default(), Fake::answering("x"));
    core.tools.provider_added("p").await;
    assert_eq!(mounted(&core), ["delegate"]);
    let tool = core.tools.get("delegate").unwrap();
    assert_eq!(
        tool.descriptor.description, "runs on `p`",
        "described with its provider"
    );
    let result = core
        .tools
        .execute(
            "delegate",
            ParentRef::top_level("a", "/"),
            "{\"x\":1}".into(),
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(result.text(), "delegate: {\"x\":1}");

    core.subagents.unregister("q").await;
    core.tools.provider_removed("q").await;
    assert_eq!(
        mounted(&core),
        ["delegate"],
        "other providers' removal is ignored"
    );
    core.subagents.unregister("p").await;
    core.tools.provider_removed("p").await;
    assert!(mounted(&core).is_empty());
    core.register("p", Capabilities::default(), Fake::answering("x"));
    core.tools.provider_added("p").await;
    assert_eq!(mounted(&core), ["delegate"]);
    assert_eq!(tool_events(&core), ["+delegate", "-delegate", "+delegate"]);

    // Loaded after its provider: mounted at once. Unloading unmounts.
    let late = Echo::new("late-plugin", "late");
    core.tools
        .add_plugin(late.binding(Some("p")), late.clone())
        .await
        .unwrap();
    assert_eq!(mounted(&core), ["delegate", "late"]);
    core.tools.remove_plugin("late-plugin").await;
    assert_eq!(mounted(&core), ["delegate"]);
}

#[tokio::test]
async fn a_tool_name_is_taken_once() {
    let core = Core::new(Duration::from_millis(100));
    let first = Echo::new("first", "subagent");
    let second = Echo::new("second", "subagent");
    core.tools
        .add_plugin(first.binding(None), first.clone())
        .await
        .unwrap();
    let err = core
        .tools
        .add_plugin(second.binding(None), second.clone())
        .await
        .unwrap_err();
    assert_eq!(
        err,
        ToolError::DuplicateToolName {
            name: "subagent".into(),
            other: "first".into()
        }
    );
    // The first stays and answers; the refused plugin may mount under a free name.
    let again = Arc::new(Echo {
        plugin: "second".into(),
        name: "other".into(),
        calls: Default::default(),
    });
    core.tools
        .add_plugin(again.binding(None), again)
        .await
        .unwrap();
    assert_eq!(mounted(&core), ["subagent", "other"]);
    core.tools
        .execute(
            "subagent",
            ParentRef::top_level("a", "/"),
            "{}".into(),
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(first.calls.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert_eq!(second.calls.load(std::sync::atomic::Ordering::SeqCst), 0);
}
