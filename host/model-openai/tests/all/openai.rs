//! The OpenAI-compatible model adapter against a real HTTP/1.1 server (hyper) on 127.0.0.1:0
//! ([`super::loopback`]).

use std::time::Duration;

use seam_agent::model::{
    ChatMessage, FinishReason, Model, ModelError, ModelRegistry, ModelReply, ModelRequest,
    ModelsConfig, OpenAiConfig, Role, ToolCall, ToolSpec,
};
use seam_model_openai::OpenAiModel;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::loopback::*;
use tokio::net::TcpListener;

// ---------------------------------------------------------------------------------------------
// Helpers

fn config(server: &Server, stream: bool) -> OpenAiConfig {
    OpenAiConfig {
        base_url: server.base_url(),
        api_key_env: None,
        model: "test-model".into(),
        stream,
        timeout_ms: 30_000,
        max_retries: 2,
        backoff_ms: 1,
        temperature: None,
        max_tokens: None,
        prices: None,
    }
}

fn model(config: OpenAiConfig) -> OpenAiModel {
    OpenAiModel::new(config).expect("valid config")
}

fn hello() -> ModelRequest {
    ModelRequest {
        messages: vec![
            ChatMessage::new(Role::System, "be brief"),
            ChatMessage::new(Role::User, "hello"),
        ],
        tools: vec![],
        traceparent: None,
        max_tokens: None,
    }
}

async fn complete(model: &OpenAiModel, request: ModelRequest) -> Result<ModelReply, ModelError> {
    model.complete(request, CancellationToken::new()).await
}

fn message(content: Value, finish: &str) -> Value {
    json!({
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "test-model",
        "choices": [{ "index": 0, "message": content, "finish_reason": finish }],
        "usage": { "prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5 },
    })
}

fn delta(delta: Value, finish: Option<&str>) -> Value {
    json!({
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "choices": [{ "index": 0, "delta": delta, "finish_reason": finish }],
    })
}

fn call(id: &str, name: &str, arguments: &str) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: arguments.into(),
    }
}

// ---------------------------------------------------------------------------------------------
// Replies

/// Content as an array of parts (some servers send it so), and a reasoning model's
/// `reasoning_content`, kept out of the answer, streamed and not.
#[tokio::test]
async fn content_parts_are_joined_and_reasoning_is_kept_apart() {
    let server = Server::start(vec![ok(message(
        json!({
            "role": "assistant",
            "reasoning_content": "the user greets me",
            "content": [
                { "type": "text", "text": "Hi " },
                { "type": "image_url", "image_url": { "url": "data:," } },
                { "type": "text", "text": "there." },
            ],
        }),
        "stop",
    ))])
    .await;
    let reply = complete(&model(config(&server, false)), hello())
        .await
        .unwrap();
    assert_eq!(reply.text, "Hi there.");
    assert_eq!(reply.reasoning, "the user greets me");

    let pieces = vec![
        format!(
            "data: {}\n\n",
            delta(
                json!({ "role": "assistant", "reasoning_content": "think" }),
                None
            )
        ),
        format!(
            "data: {}\n\n",
            delta(
                json!({ "reasoning_content": "ing", "content": "Answer" }),
                Some("stop")
            )
        ),
        "data: [DONE]\n\n".to_string(),
    ];
    let server = Server::start(vec![Answer::Sse {
        pieces,
        stall: false,
    }])
    .await;
    let reply = complete(&model(config(&server, true)), hello())
        .await
        .unwrap();
    assert_eq!(
        (reply.text.as_str(), reply.reasoning.as_str()),
        ("Answer", "thinking")
    );
    assert_eq!(reply.usage, None, "no usage was sent");
}

#[tokio::test]
async fn plain_completion() {
    let server = Server::start(vec![ok(message(
        json!({ "role": "assistant", "content": "Hi there." }),
        "stop",
    ))])
    .await;
    let reply = complete(&model(config(&server, false)), hello())
        .await
        .unwrap();
    assert_eq!(
        reply,
        ModelReply {
            text: "Hi there.".into(),
            tool_calls: vec![],
            finish: FinishReason::Stop,
            usage: Some(seam_core::types::Usage {
                prompt_tokens: 3,
                completion_tokens: 2
            }),
            reasoning: String::new(),
        }
    );
    let seen = server.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].body["stream"], json!(false));
}

#[tokio::test]
async fn resolved_through_the_registry_with_a_model_override() {
    let server = Server::start(vec![ok(message(
        json!({ "role": "assistant", "content": "ok" }),
        "stop",
    ))])
    .await;
    let registry = ModelRegistry::with_endpoints(seam_model_openai::adapter());
    registry.configure(ModelsConfig {
        openai: Some(config(&server, false)),
        ..ModelsConfig::default()
    });
    let model = registry.resolve("openai:deepseek-chat").expect("resolves");
    let reply = model
        .complete(hello(), CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(reply.text, "ok");
    assert_eq!(server.seen()[0].body["model"], json!("deepseek-chat"));
}

#[tokio::test]
async fn streaming_accumulates_content_deltas() {
    let mut pieces = vec![
        // A comment line, as DeepSeek sends while busy.
        ": keep-alive\n\n".to_string(),
        format!(
            "data: {}\n\n",
            delta(json!({ "role": "assistant", "content": "" }), None)
        ),
    ];
    // One event split across two network chunks, with CRLF line endings.
    let split = format!("data: {}\r\n\r\n", delta(json!({ "content": "Hel" }), None));
    let (a, b) = split.split_at(split.len() / 2);
    pieces.push(a.to_string());
    pieces.push(b.to_string());
    // Two events in one chunk.
    pieces.push(format!(
        "data: {}\n\ndata: {}\n\n",
        delta(json!({ "content": "lo, " }), None),
        delta(json!({ "content": "world" }), None)
    ));
    pieces.push(format!(
        "data: {}\n\n",
        delta(json!({ "content": "!" }), Some("stop"))
    ));
    // A usage-only chunk with no choices, as with `stream_options.include_usage`.
    pieces.push(format!(
        "data: {}\n\n",
        json!({ "choices": [], "usage": { "prompt_tokens": 7, "completion_tokens": 4, "total_tokens": 11 } })
    ));
    pieces.push("data: [DONE]\n\n".into());
    let server = Server::start(vec![Answer::Sse {
        pieces,
        stall: false,
    }])
    .await;
    let reply = complete(&model(config(&server, true)), hello())
        .await
        .unwrap();
    assert_eq!(reply.text, "Hello, world!");
    assert_eq!(reply.finish, FinishReason::Stop);
    assert!(reply.tool_calls.is_empty());
    assert_eq!(
        reply.usage,
        Some(seam_core::types::Usage {
            prompt_tokens: 7,
            completion_tokens: 4
        })
    );
    let seen = server.seen();
    assert_eq!(seen[0].body["stream"], json!(true));
    // Streamed usage is asked for.
    assert_eq!(seen[0].body["stream_options"]["include_usage"], json!(true));
    assert_eq!(seen[0].headers["accept"], "text/event-stream");
}

#[tokio::test]
async fn tool_calls_without_streaming() {
    let server = Server::start(vec![ok(message(
        json!({
            "role": "assistant",
            "content": null,
            "tool_calls": [
                { "id": "call_a", "type": "function",
                  "function": { "name": "get_weather", "arguments": "{\"city\":\"Paris\"}" } },
                { "id": "call_b", "type": "function",
                  "function": { "name": "get_time", "arguments": "{\"tz\":\"CET\"}" } },
            ],
        }),
        "tool_calls",
    ))])
    .await;
    let reply = complete(&model(config(&server, false)), hello())
        .await
        .unwrap();
    assert_eq!(reply.text, "");
    assert_eq!(reply.finish, FinishReason::ToolCalls);
    assert_eq!(
        reply.tool_calls,
        vec![
            call("call_a", "get_weather", r#"{"city":"Paris"}"#),
            call("call_b", "get_time", r#"{"tz":"CET"}"#),
        ]
    );
}

#[tokio::test]
async fn streamed_parallel_tool_calls_with_split_arguments() {
    let tc = |index: u32, id: Option<&str>, name: Option<&str>, args: &str| {
        let mut function = json!({ "arguments": args });
        if let Some(name) = name {
            function["name"] = json!(name);
        }
        let mut entry = json!({ "index": index, "function": function });
        if let Some(id) = id {
            entry["id"] = json!(id);
            entry["type"] = json!("function");
        }
        delta(json!({ "tool_calls": [entry] }), None)
    };
    let server = Server::start(vec![sse(&[
        delta(json!({ "role": "assistant", "content": "Checking." }), None),
        tc(0, Some("call_a"), Some("get_weather"), ""),
        tc(0, None, None, "{\"ci"),
        tc(1, Some("call_b"), Some("get_time"), "{\"tz\""),
        tc(0, None, None, "ty\": \"Par"),
        tc(1, None, None, ": \"CET\"}"),
        tc(0, None, None, "is\"}"),
        delta(json!({}), Some("tool_calls")),
    ])])
    .await;
    let reply = complete(&model(config(&server, true)), hello())
        .await
        .unwrap();
    assert_eq!(reply.text, "Checking.");
    assert_eq!(reply.finish, FinishReason::ToolCalls);
    assert_eq!(
        reply.tool_calls,
        vec![
            call("call_a", "get_weather", r#"{"city": "Paris"}"#),
            call("call_b", "get_time", r#"{"tz": "CET"}"#),
        ]
    );
}

#[tokio::test]
async fn finish_reasons_and_refusals_map() {
    let server = Server::start(vec![
        ok(message(json!({ "content": "cut" }), "length")),
        ok(message(json!({ "content": "" }), "content_filter")),
        ok(message(
            json!({ "content": null, "refusal": "I can't help with that." }),
            "stop",
        )),
        ok(message(
            json!({ "tool_calls": [{ "id": "c", "type": "function",
                     "function": { "name": "f", "arguments": "{}" } }] }),
            "function_call",
        )),
    ])
    .await;
    let model = model(config(&server, false));
    let length = complete(&model, hello()).await.unwrap();
    assert_eq!(
        (length.text.as_str(), length.finish),
        ("cut", FinishReason::Length)
    );
    let filtered = complete(&model, hello()).await.unwrap();
    assert_eq!(filtered.finish, FinishReason::Refusal);
    let refused = complete(&model, hello()).await.unwrap();
    assert_eq!(refused.finish, FinishReason::Refusal);
    assert_eq!(refused.text, "I can't help with that.");
    let legacy = complete(&model, hello()).await.unwrap();
    assert_eq!(legacy.finish, FinishReason::ToolCalls);
}

#[tokio::test]
async fn streamed_refusal_and_json_answer_to_a_stream_request() {
    let server = Server::start(vec![
        sse(&[
            delta(json!({ "role": "assistant", "refusal": "I can't " }), None),
            delta(json!({ "refusal": "do that." }), Some("stop")),
        ]),
        // A server that ignores `stream: true` and answers with one JSON body.
        ok(message(json!({ "content": "whole" }), "stop")),
    ])
    .await;
    let model = model(config(&server, true));
    let refused = complete(&model, hello()).await.unwrap();
    assert_eq!(refused.finish, FinishReason::Refusal);
    assert_eq!(refused.text, "I can't do that.");
    let whole = complete(&model, hello()).await.unwrap();
    assert_eq!(
        (whole.text.as_str(), whole.finish),
        ("whole", FinishReason::Stop)
    );
}

// ---------------------------------------------------------------------------------------------
// The request on the wire

#[tokio::test]
async fn request_body_and_headers_match_the_wire_format() {
    let var = "SEAM_TEST_OPENAI_KEY_WIRE_FORMAT_5D1C";
    std::env::set_var(var, "sk-test-wire-1234");
    let server = Server::start(vec![ok(message(json!({ "content": "done" }), "stop"))]).await;
    let mut config = config(&server, false);
    config.api_key_env = Some(var.into());
    config.temperature = Some(0.25);
    // A trailing slash on the base URL must not double up.
    config.base_url.push('/');
    let parameters = json!({
        "type": "object",
        "properties": { "city": { "type": "string" } },
        "required": ["city"],
    });
    let request = ModelRequest {
        messages: vec![
            ChatMessage::new(Role::System, "sys"),
            ChatMessage::new(Role::User, "weather in Paris?"),
            ChatMessage {
                role: Role::Assistant,
                content: String::new(),
                tool_calls: vec![call("call_1", "get_weather", r#"{"city":"Paris"}"#)],
                tool_call_id: None,
            },
            ChatMessage {
                role: Role::Tool,
                content: "sunny".into(),
                tool_calls: vec![],
                tool_call_id: Some("call_1".into()),
            },
            ChatMessage::new(Role::Assistant, "It is sunny."),
        ],
        tools: vec![ToolSpec {
            name: "get_weather".into(),
            description: "Current weather".into(),
            parameters: parameters.clone(),
        }],
        traceparent: Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".into()),
        // What a budget holds for the call.
        max_tokens: Some(321),
    };
    complete(&model(config), request).await.unwrap();

    let seen = server.seen();
    assert_eq!(seen.len(), 1);
    let seen = &seen[0];
    assert_eq!(seen.method, "POST");
    assert_eq!(seen.path, "/v1/chat/completions");
    assert_eq!(seen.headers["authorization"], "Bearer sk-test-wire-1234");
    // The call's span, for an endpoint that traces.
    assert_eq!(
        seen.headers["traceparent"],
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    );
    assert!(seen.headers["content-type"]
        .to_str()
        .unwrap()
        .starts_with("application/json"));
    assert_eq!(
        seen.body,
        json!({
            "model": "test-model",
            "stream": false,
            "temperature": 0.25,
            "max_tokens": 321,
            "messages": [
                { "role": "system", "content": "sys" },
                { "role": "user", "content": "weather in Paris?" },
                { "role": "assistant", "content": null, "tool_calls": [
                    { "id": "call_1", "type": "function",
                      "function": { "name": "get_weather", "arguments": "{\"city\":\"Paris\"}" } },
                ] },
                { "role": "tool", "content": "sunny", "tool_call_id": "call_1" },
                { "role": "assistant", "content": "It is sunny." },
            ],
            "tools": [
                { "type": "function", "function": {
                    "name": "get_weather", "description": "Current weather",
                    "parameters": parameters,
                } },
            ],
        })
    );
}

#[tokio::test]
async fn no_tools_and_no_key_leave_out_tools_and_authorization() {
    let server = Server::start(vec![ok(message(json!({ "content": "x" }), "stop"))]).await;
    complete(&model(config(&server, false)), hello())
        .await
        .unwrap();
    let seen = &server.seen()[0];
    assert!(seen.headers.get("authorization").is_none());
    assert!(seen.headers.get("traceparent").is_none(), "untraced");
    let body = seen.body.as_object().unwrap();
    assert!(!body.contains_key("tools"));
    assert!(!body.contains_key("temperature"));
    assert!(!body.contains_key("max_tokens"), "no budget, no bound");
}

#[tokio::test]
async fn missing_api_key_variable_is_a_config_error_naming_it() {
    let var = "SEAM_TEST_OPENAI_KEY_NEVER_SET_9B2E";
    std::env::remove_var(var);
    let server = Server::start(vec![]).await;
    let mut config = config(&server, false);
    config.api_key_env = Some(var.into());
    let error = complete(&model(config), hello()).await.unwrap_err();
    match &error {
        ModelError::Config { message, .. } => assert!(message.contains(var), "{message}"),
        other => panic!("expected a config error, got {other:?}"),
    }
    assert!(server.seen().is_empty());
}

#[tokio::test]
async fn bad_config_is_rejected_up_front() {
    let base = OpenAiConfig {
        base_url: "http://127.0.0.1:1/v1".into(),
        api_key_env: None,
        model: "m".into(),
        stream: true,
        timeout_ms: 1000,
        max_retries: 0,
        backoff_ms: 1,
        temperature: None,
        max_tokens: None,
        prices: None,
    };
    for bad in [
        OpenAiConfig {
            base_url: "127.0.0.1:1/v1".into(),
            ..base.clone()
        },
        OpenAiConfig {
            model: " ".into(),
            ..base.clone()
        },
        OpenAiConfig {
            api_key_env: Some(String::new()),
            ..base.clone()
        },
    ] {
        assert!(matches!(
            OpenAiModel::new(bad),
            Err(ModelError::Config { .. })
        ));
    }
}

// ---------------------------------------------------------------------------------------------
// Errors, retries, timeouts, aborts

#[tokio::test]
async fn rate_limit_is_retried_then_succeeds() {
    let server = Server::start(vec![
        status(429, r#"{"error":{"message":"slow down"}}"#),
        ok(message(json!({ "content": "after retry" }), "stop")),
    ])
    .await;
    let reply = complete(&model(config(&server, false)), hello())
        .await
        .unwrap();
    assert_eq!(reply.text, "after retry");
    assert_eq!(server.seen().len(), 2);
}

#[tokio::test]
async fn retry_after_header_wins_over_the_backoff() {
    let server = Server::start(vec![
        Answer::Json {
            status: 503,
            headers: vec![("retry-after", "0")],
            body: "busy".into(),
        },
        ok(message(json!({ "content": "back" }), "stop")),
    ])
    .await;
    let mut config = config(&server, false);
    // An hour of backoff: only the header's zero lets this finish.
    config.backoff_ms = 3_600_000;
    let reply = tokio::time::timeout(Duration::from_secs(60), complete(&model(config), hello()))
        .await
        .expect("Retry-After: 0 was honoured")
        .unwrap();
    assert_eq!(reply.text, "back");
}

#[tokio::test]
async fn server_errors_exhaust_the_retries() {
    let server = Server::start(vec![
        status(500, "boom 1"),
        status(502, "boom 2"),
        status(500, r#"{"error":{"message":"still broken"}}"#),
        ok(message(json!({ "content": "too late" }), "stop")),
    ])
    .await;
    let error = complete(&model(config(&server, false)), hello())
        .await
        .unwrap_err();
    assert_eq!(
        error,
        ModelError::Http {
            status: 500,
            body: "still broken".into()
        }
    );
    // max_retries = 2: one try and two retries.
    assert_eq!(server.seen().len(), 3);
}

#[tokio::test]
async fn unauthorized_fails_at_once() {
    let var = "SEAM_TEST_OPENAI_KEY_UNAUTHORIZED_41AF";
    std::env::set_var(var, "sk-wrong");
    let server = Server::start(vec![
        status(
            401,
            r#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error"}}"#,
        ),
        ok(message(json!({ "content": "never" }), "stop")),
    ])
    .await;
    let mut config = config(&server, false);
    config.api_key_env = Some(var.into());
    let error = complete(&model(config), hello()).await.unwrap_err();
    let ModelError::Http { status, body } = &error else {
        panic!("expected an HTTP error, got {error:?}");
    };
    assert_eq!(*status, 401);
    assert!(body.contains("unauthorized"), "{body}");
    assert!(body.contains(var), "{body}");
    assert!(body.contains("Incorrect API key provided"), "{body}");
    assert!(error.to_string().contains("401"));
    assert_eq!(server.seen().len(), 1);
}

#[tokio::test]
async fn long_error_bodies_are_shortened() {
    let long = "x".repeat(10_000);
    let server = Server::start(vec![status(400, &long)]).await;
    let error = complete(&model(config(&server, false)), hello())
        .await
        .unwrap_err();
    let ModelError::Http { status, body } = error else {
        panic!("expected an HTTP error");
    };
    assert_eq!(status, 400);
    assert!(body.len() < 1000, "{} bytes", body.len());
}

#[tokio::test]
async fn a_multibyte_error_body_is_cut_on_a_character_boundary_and_marked() {
    // Two-, three- and four-byte characters, so that a cut at a byte count lands inside one.
    let long = "é€😀".repeat(400);
    let server = Server::start(vec![status(400, &long)]).await;
    let error = complete(&model(config(&server, false)), hello())
        .await
        .unwrap_err();
    let ModelError::Http { body, .. } = error else {
        panic!("expected an HTTP error");
    };
    let kept = body.strip_suffix('…').expect("the cut is marked");
    assert_eq!(kept.chars().count(), 300);
    assert!(long.starts_with(kept), "a prefix of whole characters");
    // Short bodies are kept whole, unmarked.
    let server = Server::start(vec![status(400, "é€😀")]).await;
    let error = complete(&model(config(&server, false)), hello())
        .await
        .unwrap_err();
    assert!(
        matches!(&error, ModelError::Http { body, .. } if body == "é€😀"),
        "{error:?}"
    );
}

#[tokio::test]
async fn no_answer_in_time_is_a_timeout() {
    let server = Server::start(vec![Answer::Stall]).await;
    let mut config = config(&server, false);
    config.timeout_ms = 200;
    config.max_retries = 0;
    let error = complete(&model(config), hello()).await.unwrap_err();
    assert_eq!(error, ModelError::Timeout(200));
    assert_eq!(server.seen().len(), 1);
}

#[tokio::test]
async fn a_timeout_is_retried_and_the_wait_is_logged() {
    let (log, _guard) = super::log::CapturedLog::start();
    let server = Server::start(vec![
        Answer::Stall,
        ok(message(json!({ "content": "second try" }), "stop")),
    ])
    .await;
    let mut config = config(&server, false);
    config.timeout_ms = 200;
    let reply = complete(&model(config), hello()).await.unwrap();
    assert_eq!(reply.text, "second try");
    assert_eq!(server.seen().len(), 2);
    let warned: Vec<String> = log
        .lines()
        .into_iter()
        .filter(|l| l.contains("WARN") && l.contains("did not answer within 200 ms; retry 1 of 2"))
        .collect();
    assert_eq!(warned.len(), 1, "{:#?}", log.lines());
}

#[tokio::test]
async fn an_unreachable_endpoint_is_retried_then_reported() {
    let (log, _guard) = super::log::CapturedLog::start();
    // A port nobody listens on: bound, then let go.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut config = OpenAiConfig {
        base_url: format!("http://127.0.0.1:{port}/v1"),
        ..config(&Server::start(vec![]).await, false)
    };
    config.max_retries = 2;
    let error = complete(&model(config), hello()).await.unwrap_err();
    assert!(matches!(error, ModelError::Transport(_)), "{error:?}");
    let retries = log
        .lines()
        .into_iter()
        .filter(|l| l.contains("cannot reach the model endpoint") && l.contains("; retry "))
        .count();
    assert_eq!(retries, 2, "{:#?}", log.lines());
}

#[tokio::test]
async fn retry_after_ms_and_an_http_date_are_honoured() {
    for (name, value) in [
        ("retry-after-ms", "0"),
        ("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT"),
    ] {
        let server = Server::start(vec![
            Answer::Json {
                status: 429,
                headers: vec![(name, value)],
                body: "slow down".into(),
            },
            ok(message(json!({ "content": "back" }), "stop")),
        ])
        .await;
        let mut config = config(&server, false);
        // An hour of backoff: only the header's zero wait lets this finish.
        config.backoff_ms = 3_600_000;
        let reply =
            tokio::time::timeout(Duration::from_secs(60), complete(&model(config), hello()))
                .await
                .unwrap_or_else(|_| panic!("{name}: {value} was not honoured"))
                .unwrap();
        assert_eq!(reply.text, "back");
    }
}

#[tokio::test]
async fn a_stream_cut_after_the_answer_began_says_so() {
    let server = Server::start(vec![Answer::Cut {
        pieces: vec![format!(
            "data: {}\n\n",
            delta(json!({ "content": "partial" }), None)
        )],
    }])
    .await;
    let error = complete(&model(config(&server, true)), hello())
        .await
        .unwrap_err();
    assert!(matches!(error, ModelError::StreamBroke(_)), "{error:?}");
    assert!(
        error
            .to_string()
            .contains("stream broke after the answer began"),
        "{error}"
    );
    // Not retried: part of the answer was already taken.
    assert_eq!(server.seen().len(), 1);
}

#[tokio::test]
async fn the_client_says_who_it_is_and_a_zero_timeout_is_refused() {
    let server = Server::start(vec![ok(message(json!({ "content": "hi" }), "stop"))]).await;
    complete(&model(config(&server, false)), hello())
        .await
        .unwrap();
    let agent = server.seen()[0].headers["user-agent"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(agent.starts_with("seam/"), "{agent}");
    let mut zero = config(&server, false);
    zero.timeout_ms = 0;
    let Err(ModelError::Config { message, .. }) = OpenAiModel::new(zero) else {
        panic!("a zero timeout is refused");
    };
    assert!(message.contains("timeout_ms"), "{message}");
}

#[tokio::test]
async fn a_stream_that_stalls_is_a_timeout() {
    let server = Server::start(vec![Answer::Sse {
        pieces: vec![format!(
            "data: {}\n\n",
            delta(json!({ "content": "partial" }), None)
        )],
        stall: true,
    }])
    .await;
    let mut config = config(&server, true);
    config.timeout_ms = 200;
    let error = complete(&model(config), hello()).await.unwrap_err();
    assert_eq!(
        error,
        ModelError::Protocol("the stream stopped: no next piece within 200 ms (timeout_ms)".into())
    );
}

#[tokio::test]
async fn abort_ends_a_pending_request() {
    let server = Server::start(vec![Answer::Stall]).await;
    let model = model(config(&server, true));
    let abort = CancellationToken::new();
    let call = tokio::spawn(model.complete(hello(), abort.clone()));
    server.wait_for_requests(1).await;
    abort.cancel();
    assert_eq!(call.await.unwrap(), Err(ModelError::Aborted));
}

#[tokio::test]
async fn abort_ends_a_stream_midway() {
    let server = Server::start(vec![Answer::Sse {
        pieces: vec![format!(
            "data: {}\n\n",
            delta(json!({ "content": "partial" }), None)
        )],
        stall: true,
    }])
    .await;
    let model = model(config(&server, true));
    let abort = CancellationToken::new();
    let call = tokio::spawn(model.complete(hello(), abort.clone()));
    server.wait_for_requests(1).await;
    abort.cancel();
    assert_eq!(call.await.unwrap(), Err(ModelError::Aborted));
}

#[tokio::test]
async fn abort_ends_a_backoff_sleep() {
    let server = Server::start(vec![status(429, "later")]).await;
    let mut config = config(&server, false);
    config.backoff_ms = 3_600_000;
    let model = model(config);
    let abort = CancellationToken::new();
    let call = tokio::spawn(model.complete(hello(), abort.clone()));
    server.wait_for_requests(1).await;
    abort.cancel();
    assert_eq!(call.await.unwrap(), Err(ModelError::Aborted));
    assert_eq!(server.seen().len(), 1);
}

#[tokio::test]
async fn an_aborted_token_sends_nothing() {
    let server = Server::start(vec![]).await;
    let abort = CancellationToken::new();
    abort.cancel();
    let result = model(config(&server, false)).complete(hello(), abort).await;
    assert_eq!(result, Err(ModelError::Aborted));
    assert!(server.seen().is_empty());
}

#[tokio::test]
async fn connection_refused_is_a_transport_error() {
    // A port that was just free: nothing listens there any more.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let config = OpenAiConfig {
        base_url: format!("http://{addr}/v1"),
        api_key_env: None,
        model: "m".into(),
        stream: false,
        timeout_ms: 30_000,
        max_retries: 2,
        backoff_ms: 1,
        temperature: None,
        max_tokens: None,
        prices: None,
    };
    let error = complete(&model(config), hello()).await.unwrap_err();
    assert!(matches!(error, ModelError::Transport(_)), "{error:?}");
}

#[tokio::test]
async fn malformed_answers_are_protocol_errors() {
    let server = Server::start(vec![
        status(200, "{ not json"),
        ok(json!({ "choices": [] })),
        Answer::Sse {
            pieces: vec!["data: {\"choices\": [oops\n\n".into()],
            stall: false,
        },
        // Ends cleanly but with neither a finish reason nor `[DONE]`.
        Answer::Sse {
            pieces: vec![format!(
                "data: {}\n\n",
                delta(json!({ "content": "half" }), None)
            )],
            stall: false,
        },
        ok(message(
            json!({ "tool_calls": [{ "id": "c", "function": { "arguments": "{}" } }] }),
            "tool_calls",
        )),
    ])
    .await;
    let json_model = model(config(&server, false));
    let stream_model = model(config(&server, true));
    for model in [
        &json_model,
        &json_model,
        &stream_model,
        &stream_model,
        &json_model,
    ] {
        let error = complete(model, hello()).await.unwrap_err();
        assert!(matches!(error, ModelError::Protocol(_)), "{error:?}");
    }
    assert_eq!(server.seen().len(), 5);
}
