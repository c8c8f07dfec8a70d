//! The paths the gateway answers itself, known in one place: the configuration's checks (no
//! RPC path or pass-through lane may take them), the router and the agent card read them here.

/// The operator console's page.
pub const CONSOLE: &str = "/console";

/// The well-known path of the A2A agent card (A2A 0.3 and 1.0).
pub const AGENT_CARD: &str = "/.well-known/agent-card.json";

/// The older well-known path of the agent card (A2A 0.2), served the card with 0.3's fields.
pub const AGENT_CARD_0_2: &str = "/.well-known/agent.json";

/// The admin route that asks for a reload (what SIGHUP and `wiregate reload` do).
pub const ADMIN_RELOAD: &str = "/admin/reload";

/// The A2A HTTP+JSON (REST) binding; the card names `{base}{A2A_REST}`.
pub const A2A_REST: &str = "/a2a/rest";

/// Where the gateway's own routes live: the server registers each of its routes under one of
/// these (and checks it, `server::routes`), so no RPC path, A2A binding or pass-through fast lane
/// may take them.
pub const OWN_ROUTES: &[&str] = &[
    "/tasks",
    "/contexts",
    "/events",
    "/.well-known",
    "/healthz",
    "/readyz",
    "/metrics",
    "/migration",
    "/admin",
    CONSOLE,
    A2A_REST,
];

/// Whether `path` is one of [`OWN_ROUTES`] or lies below one (on segment boundaries).
pub fn is_own_route(path: &str) -> bool {
    let path = path.strip_suffix('/').unwrap_or(path);
    OWN_ROUTES.iter().any(|o| {
        path.strip_prefix(o)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    })
}

/// The route template of one of the gateway's own paths, for a span's name and `http.route`:
/// ids replaced by their parameter's name, so names stay few. `None` for a path it does not
/// know.
pub fn template(path: &str) -> Option<&'static str> {
    let path = path.strip_suffix('/').unwrap_or(path);
    let segments: Vec<&str> = path.split('/').skip(1).collect();
    Some(match segments.as_slice() {
        ["tasks", _, "events"] => "/tasks/{taskId}/events",
        ["contexts", _, "events"] => "/contexts/{contextId}/events",
        ["events"] => "/events",
        ["healthz"] => "/healthz",
        ["readyz"] => "/readyz",
        ["metrics"] => "/metrics",
        [".well-known", "agent-card.json"] => AGENT_CARD,
        [".well-known", "agent.json"] => AGENT_CARD_0_2,
        ["a2a", "rest", ..] => "/a2a/rest/*",
        ["migration", ..] => "/migration/*",
        ["admin", "reload"] => ADMIN_RELOAD,
        ["console", ..] => "/console/*",
        _ => return None,
    })
}

#[cfg(test)]
mod template_tests {
    use super::template;

    #[test]
    fn ids_become_their_parameters() {
        assert_eq!(
            template("/tasks/t-1/events"),
            Some("/tasks/{taskId}/events")
        );
        assert_eq!(
            template("/contexts/c/events/"),
            Some("/contexts/{contextId}/events")
        );
        assert_eq!(template("/a2a/rest/v1/message:send"), Some("/a2a/rest/*"));
        assert_eq!(template("/files/x"), None);
    }
}
