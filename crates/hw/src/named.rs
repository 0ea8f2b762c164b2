//! A text and its name: what every reader of tool outputs takes, whether
//! the text came from a file, an upload or a fleet folder. Its own module
//! so that the readers (`files`, `probe`, `fleet`) depend on it and not on
//! each other.

/// A text and the name it is reported under (a file name, or the name of
/// an upload).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NamedText {
    pub name: String,
    pub text: String,
}
