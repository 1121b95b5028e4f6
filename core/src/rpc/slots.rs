//! Requests by our own id: the most recent one kept aside, the others in
//! a map. A client that makes its calls one after another (the common
//! agent) then never touches the map: its request is inserted, looked up
//! while it waits and removed with its answer, each a compare. The
//! engine's pending requests and the adapters' call slots are kept so.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use super::IdHasher;

/// Values by request id (ids are unique: each is given once).
#[derive(Debug)]
pub struct IdSlots<T> {
    /// The call inserted last, while it lasts.
    recent: Option<(u64, T)>,
    rest: HashMap<u64, T, BuildHasherDefault<IdHasher>>,
}

impl<T> Default for IdSlots<T> {
    fn default() -> Self {
        IdSlots {
            recent: None,
            rest: HashMap::default(),
        }
    }
}

impl<T> IdSlots<T> {
    /// Adds request `id` (a new id: one already in is the caller's bug,
    /// and would then be found twice).
    pub fn insert(&mut self, id: u64, value: T) {
        if let Some((before, value)) = self.recent.take() {
            self.rest.insert(before, value);
        }
        self.recent = Some((id, value));
    }

    /// The value of `id`.
    pub fn get(&self, id: u64) -> Option<&T> {
        match &self.recent {
            Some((recent, value)) if *recent == id => Some(value),
            _ => self.rest.get(&id),
        }
    }

    /// The value of `id`, to change.
    pub fn get_mut(&mut self, id: u64) -> Option<&mut T> {
        match &mut self.recent {
            Some((recent, value)) if *recent == id => Some(value),
            _ => self.rest.get_mut(&id),
        }
    }

    /// Takes `id` out.
    pub fn remove(&mut self, id: u64) -> Option<T> {
        match &self.recent {
            Some((recent, _)) if *recent == id => self.recent.take().map(|(_, value)| value),
            _ => self.rest.remove(&id),
        }
    }

    /// Whether `id` is in.
    pub fn contains(&self, id: u64) -> bool {
        self.get(id).is_some()
    }

    /// How many are in.
    pub fn len(&self) -> usize {
        self.rest.len() + usize::from(self.recent.is_some())
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.recent.is_none() && self.rest.is_empty()
    }

    /// Room in the map, for giving memory back after a burst.
    pub fn capacity(&self) -> usize {
        self.rest.capacity()
    }

    /// Gives the map's memory back down to room for `min` values.
    pub fn shrink_to(&mut self, min: usize) {
        self.rest.shrink_to(min);
    }

    /// Every id and value, in no order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &T)> {
        let recent = self.recent.iter().map(|(id, value)| (*id, value));
        recent.chain(self.rest.iter().map(|(id, value)| (*id, value)))
    }

    /// Every value, in no order.
    pub fn values(&self) -> impl Iterator<Item = &T> {
        self.iter().map(|(_, value)| value)
    }

    /// Every value, to change, in no order.
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut T> {
        let recent = self.recent.iter_mut().map(|(_, value)| value);
        recent.chain(self.rest.values_mut())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Any sequence of inserts (of new ids), lookups, changes and
        /// removals gives what a plain map gives.
        #[test]
        fn slots_behave_as_a_map(ops in proptest::collection::vec((0u8..5, 0u64..12), 0..200)) {
            let mut slots = IdSlots::default();
            let mut model = std::collections::BTreeMap::new();
            let mut next = 0u64;
            for (op, pick) in ops {
                // Mostly an id in use, sometimes one that is not.
                let id = model.keys().nth(pick as usize % (model.len() + 1)).copied().unwrap_or(next + pick);
                match op {
                    0 => {
                        slots.insert(next, next * 10);
                        model.insert(next, next * 10);
                        next += 1;
                    }
                    1 => prop_assert_eq!(slots.get(id), model.get(&id)),
                    2 => {
                        if let Some(v) = slots.get_mut(id) {
                            *v += 1;
                        }
                        if let Some(v) = model.get_mut(&id) {
                            *v += 1;
                        }
                    }
                    3 => prop_assert_eq!(slots.remove(id), model.remove(&id)),
                    _ => {
                        for v in slots.values_mut() {
                            *v += 2;
                        }
                        for v in model.values_mut() {
                            *v += 2;
                        }
                    }
                }
                prop_assert_eq!(slots.len(), model.len());
                prop_assert_eq!(slots.is_empty(), model.is_empty());
                prop_assert_eq!(slots.contains(id), model.contains_key(&id));
                let mut all: Vec<(u64, u64)> = slots.iter().map(|(id, v)| (id, *v)).collect();
                all.sort_unstable();
                let want: Vec<(u64, u64)> = model.iter().map(|(id, v)| (*id, *v)).collect();
                prop_assert_eq!(all, want);
                prop_assert_eq!(slots.values().count(), model.len());
            }
        }
    }
}
