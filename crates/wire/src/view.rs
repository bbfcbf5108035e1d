//! The shape shared by every view: a newtype over `T: AsRef<[u8]>`.

/// Declares a view struct with `new_unchecked`, `new_checked` (which calls the
/// type's own `check_len`), `into_inner` and `as_bytes`.
macro_rules! view_struct {
    ($(#[$meta:meta])* $name:ident) => {
        $(#[$meta])*
        #[derive(Debug, Clone)]
        pub struct $name<T: AsRef<[u8]>> {
            buffer: T,
        }

        impl<T: AsRef<[u8]>> $name<T> {
            /// Wraps `buffer` without checking its length. Accessors never
            /// panic: past the end of a short buffer they read 0 and drop writes.
            pub const fn new_unchecked(buffer: T) -> Self {
                Self { buffer }
            }

            /// Wraps `buffer` after `check_len` succeeded.
            pub fn new_checked(buffer: T) -> Result<Self, $crate::WireError> {
                let view = Self::new_unchecked(buffer);
                view.check_len()?;
                Ok(view)
            }

            /// The wrapped buffer.
            pub fn into_inner(self) -> T {
                self.buffer
            }

            /// All bytes of the wrapped buffer.
            pub fn as_bytes(&self) -> &[u8] {
                self.buffer.as_ref()
            }
        }
    };
}

pub(crate) use view_struct;
