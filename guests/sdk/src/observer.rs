//! The [`Observer`] trait and [`export_observer!`](crate::export_observer).

use serde::de::DeserializeOwned;

/// A lifecycle observer: sees every event, in order, and can change nothing.
pub trait Observer {
    /// The plugin's config.
    type Config: DeserializeOwned;

    /// Called once per event with the event as JSON (the shape `seam --events` prints: its
    /// `event` key names it). An error is logged by the host, which carries on.
    fn on_event(config: Self::Config, event: serde_json::Value) -> Result<(), String>;
}

#[doc(hidden)]
pub fn on_event<O: Observer>(config: &str, event: &str) -> Result<(), String> {
    let config = crate::config::typed(config)?;
    let event = serde_json::from_str(event).map_err(|e| format!("event is not JSON: {e}"))?;
    O::on_event(config, event)
}

/// Exports `$ty`, which implements [`Observer`], as the component's `observer`.
#[macro_export]
macro_rules! export_observer {
    ($ty:ident) => {
        const _: () = {
            use $crate::exports::observer::exports::seam::plugin::observer::Guest;
            use ::std::string::String;

            impl Guest for $ty {
                fn on_event(config: String, event: String) -> ::std::result::Result<(), String> {
                    $crate::observer::on_event::<$ty>(&config, &event)
                }
            }

            $crate::exports::observer::export_observer_world!($ty with_types_in $crate::exports::observer);
        };
    };
}
