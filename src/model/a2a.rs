//! The A2A protocol's published versions and methods: what a call in a spec version asks.

/// The request header naming the protocol version.
pub(crate) const VERSION_HEADER: &str = "a2a-version";

/// A published protocol version.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Version {
    /// A2A 1.0: PascalCase methods, protobuf JSON.
    V1_0,
    /// A2A 0.3: slash methods, `kind` discriminators.
    V0_3,
}

impl Version {
    /// How the card and headers spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Version::V1_0 => "1.0",
            Version::V0_3 => "0.3",
        }
    }

    /// The client-dialect label in metrics.
    pub fn label(self) -> &'static str {
        match self {
            Version::V1_0 => "a2a-1.0",
            Version::V0_3 => "a2a-0.3",
        }
    }

    /// Reads an `A2A-Version` value by major and minor (`1.0`, `1.0.2`, `0.3.0`).
    pub fn parse(v: &str) -> Option<Self> {
        let mut it = v.trim().split('.');
        let major = it.next()?.parse::<u32>().ok()?;
        let minor = it.next().map_or(Some(0), |m| m.parse::<u32>().ok())?;
        if it.any(|p| p.parse::<u32>().is_err()) {
            return None;
        }
        match (major, minor) {
            (1, 0) => Some(Version::V1_0),
            (0, 3) => Some(Version::V0_3),
            _ => None,
        }
    }
}

/// An A2A operation, whatever its name in either version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// `SendMessage` / `message/send`.
    Send,
    /// `SendStreamingMessage` / `message/stream`.
    Stream,
    /// `GetTask` / `tasks/get`.
    Get,
    /// `CancelTask` / `tasks/cancel`.
    Cancel,
    /// `SubscribeToTask` / `tasks/resubscribe`.
    Subscribe,
    /// `ListTasks` (1.0 only).
    ListTasks,
    /// A push-notification configuration method.
    Push(PushOp),
    /// `GetExtendedAgentCard` / `agent/getAuthenticatedExtendedCard`.
    ExtendedCard,
}

impl Method {
    /// The method a 1.0 (PascalCase) name asks, if it is one.
    pub fn v1_0(name: &str) -> Option<Self> {
        Some(match name {
            "SendMessage" => Method::Send,
            "SendStreamingMessage" => Method::Stream,
            "GetTask" => Method::Get,
            "CancelTask" => Method::Cancel,
            "SubscribeToTask" => Method::Subscribe,
            "ListTasks" => Method::ListTasks,
            "CreateTaskPushNotificationConfig" => Method::Push(PushOp::Create),
            "GetTaskPushNotificationConfig" => Method::Push(PushOp::Get),
            "ListTaskPushNotificationConfigs" => Method::Push(PushOp::List),
            "DeleteTaskPushNotificationConfig" => Method::Push(PushOp::Delete),
            "GetExtendedAgentCard" => Method::ExtendedCard,
            _ => return None,
        })
    }

    /// Its 1.0 (PascalCase) name: what the REST binding's calls are admitted and limited as.
    pub fn v1_0_name(self) -> &'static str {
        match self {
            Method::Send => "SendMessage",
            Method::Stream => "SendStreamingMessage",
            Method::Get => "GetTask",
            Method::Cancel => "CancelTask",
            Method::Subscribe => "SubscribeToTask",
            Method::ListTasks => "ListTasks",
            Method::Push(PushOp::Create) => "CreateTaskPushNotificationConfig",
            Method::Push(PushOp::Get) => "GetTaskPushNotificationConfig",
            Method::Push(PushOp::List) => "ListTaskPushNotificationConfigs",
            Method::Push(PushOp::Delete) => "DeleteTaskPushNotificationConfig",
            Method::ExtendedCard => "GetExtendedAgentCard",
        }
    }

    /// The method a 0.3 (slash) name asks, if it is one.
    pub fn v0_3(name: &str) -> Option<Self> {
        Some(match name {
            "message/send" => Method::Send,
            "message/stream" => Method::Stream,
            "tasks/get" => Method::Get,
            "tasks/cancel" => Method::Cancel,
            "tasks/resubscribe" => Method::Subscribe,
            "tasks/pushNotificationConfig/set" => Method::Push(PushOp::Create),
            "tasks/pushNotificationConfig/get" => Method::Push(PushOp::Get),
            "tasks/pushNotificationConfig/list" => Method::Push(PushOp::List),
            "tasks/pushNotificationConfig/delete" => Method::Push(PushOp::Delete),
            "agent/getAuthenticatedExtendedCard" => Method::ExtendedCard,
            _ => return None,
        })
    }

    /// Whether the method answers a stream.
    pub fn is_streaming(self) -> bool {
        matches!(self, Method::Stream | Method::Subscribe)
    }
}

/// A call in a spec version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpecCall {
    /// The version it speaks.
    pub version: Version,
    /// What it asks.
    pub method: Method,
}

/// The push method a spec call names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PushOp {
    /// Create (set).
    Create,
    /// Get.
    Get,
    /// List.
    List,
    /// Delete.
    Delete,
}
