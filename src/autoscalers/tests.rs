use super::*;

fn hpa(namespace: &str, name: &str, deployment: Option<&str>) -> Object {
    Object {
        namespace: namespace.into(),
        name: name.into(),
        deployment: deployment.map(Into::into),
        controller: Controller::None,
    }
}

fn synced() -> Autoscalers {
    let index = Autoscalers::default();
    for kind in Kind::ALL {
        index.list_started(kind);
        index.list_done(kind);
    }
    index
}

fn names(index: &Autoscalers, namespace: &str, deployment: &str) -> Vec<(Kind, String)> {
    match index.lookup(namespace, deployment) {
        Lookup::Checked(found) => found.into_iter().map(|f| (f.kind, f.name)).collect(),
        Lookup::Unchecked(why) => panic!("unchecked: {why}"),
    }
}

#[test]
fn add_modify_delete() {
    let index = synced();
    index.apply(Kind::Hpa, &hpa("ns", "a", Some("cache")));
    index.apply(Kind::Hpa, &hpa("ns", "b", Some("cache")));
    index.apply(Kind::ScaledObject, &hpa("ns", "so", Some("cache")));
    assert_eq!(
        names(&index, "ns", "cache"),
        [
            (Kind::Hpa, "a".into()),
            (Kind::Hpa, "b".into()),
            (Kind::ScaledObject, "so".into())
        ]
    );
    assert_eq!(index.len(Kind::Hpa), 2);

    // Retargeted: gone from the old Deployment, there under the new one.
    index.apply(Kind::Hpa, &hpa("ns", "a", Some("other")));
    assert_eq!(names(&index, "ns", "other"), [(Kind::Hpa, "a".into())]);
    assert_eq!(
        names(&index, "ns", "cache"),
        [(Kind::Hpa, "b".into()), (Kind::ScaledObject, "so".into())]
    );
    // Aimed at something else than a Deployment now: dropped.
    index.apply(Kind::Hpa, &hpa("ns", "b", None));
    assert_eq!(
        names(&index, "ns", "cache"),
        [(Kind::ScaledObject, "so".into())]
    );
    assert_eq!(index.len(Kind::Hpa), 1);
    // A new controller is a change the index keeps.
    let mut owned = hpa("ns", "a", Some("other"));
    owned.controller = Controller::Memcached("other".into());
    index.apply(Kind::Hpa, &owned);
    match index.lookup("ns", "other") {
        Lookup::Checked(found) => assert_eq!(found[0].controller, owned.controller),
        other => panic!("{other:?}"),
    }

    index.delete(Kind::Hpa, "ns", "a");
    index.delete(Kind::Hpa, "ns", "never-there");
    index.delete(Kind::ScaledObject, "ns", "so");
    assert!(names(&index, "ns", "cache").is_empty());
    assert!(names(&index, "ns", "other").is_empty());
    assert!(index.is_empty());
    assert_eq!(index.stats.objects[Kind::Hpa as usize].get(), 0);
}

#[test]
fn other_namespaces_never_match() {
    let index = synced();
    index.apply(Kind::Hpa, &hpa("team-a", "h", Some("cache")));
    index.apply(Kind::ScaledObject, &hpa("team-a", "so", Some("cache")));
    assert!(names(&index, "team-b", "cache").is_empty());
    assert!(names(&index, "", "cache").is_empty());
    assert_eq!(names(&index, "team-a", "cache").len(), 2);
    // Same object name in two namespaces: two objects.
    index.apply(Kind::Hpa, &hpa("team-b", "h", Some("cache")));
    index.delete(Kind::Hpa, "team-a", "h");
    assert_eq!(names(&index, "team-b", "cache"), [(Kind::Hpa, "h".into())]);
}

#[test]
fn a_relist_replaces_the_kind_whole_when_it_completes() {
    let index = synced();
    index.apply(Kind::Hpa, &hpa("ns", "deleted-while-away", Some("cache")));
    index.apply(Kind::ScaledObject, &hpa("ns", "so", Some("cache")));
    // 410 Gone: a new list. Until it completes, the old objects answer.
    index.list_started(Kind::Hpa);
    index.listed(Kind::Hpa, &hpa("ns", "new", Some("cache")));
    assert_eq!(
        names(&index, "ns", "cache"),
        [
            (Kind::Hpa, "deleted-while-away".into()),
            (Kind::ScaledObject, "so".into())
        ]
    );
    index.list_done(Kind::Hpa);
    assert_eq!(
        names(&index, "ns", "cache"),
        [(Kind::Hpa, "new".into()), (Kind::ScaledObject, "so".into())],
        "the relisted kind is replaced, the other kept"
    );
    assert_eq!(index.stats.objects[Kind::Hpa as usize].get(), 1);
}

#[test]
fn until_both_kinds_are_known_a_lookup_is_unchecked() {
    let index = Autoscalers::default();
    let unchecked = |index: &Autoscalers| match index.lookup("ns", "cache") {
        Lookup::Unchecked(why) => why,
        other => panic!("{other:?}"),
    };
    assert!(unchecked(&index).contains("not listed yet"));
    index.list_started(Kind::Hpa);
    index.list_done(Kind::Hpa);
    assert!(unchecked(&index).contains("ScaledObjects of the cluster are not listed yet"));
    index.set_sync(Kind::ScaledObject, Sync::NotServed);
    assert_eq!(index.lookup("ns", "cache"), Lookup::Checked(Vec::new()));
    assert_eq!(index.stats.synced[Kind::ScaledObject as usize].get(), 1);

    index.set_sync(Kind::Hpa, Sync::Unavailable("403 Forbidden".into()));
    let why = unchecked(&index);
    assert!(
        why.contains("HorizontalPodAutoscalers cannot be read: 403 Forbidden"),
        "{why}"
    );
    assert_eq!(index.stats.synced[Kind::Hpa as usize].get(), 0);
    // Recovery is a fresh list.
    index.list_started(Kind::Hpa);
    index.list_done(Kind::Hpa);
    assert_eq!(index.lookup("ns", "cache"), Lookup::Checked(Vec::new()));
}

#[test]
fn not_served_empties_the_kind() {
    let index = synced();
    index.apply(Kind::ScaledObject, &hpa("ns", "so", Some("cache")));
    index.set_sync(Kind::ScaledObject, Sync::NotServed);
    assert!(names(&index, "ns", "cache").is_empty());
    assert_eq!(index.len(Kind::ScaledObject), 0);
}

#[test]
fn status_only_updates_change_nothing() {
    let index = synced();
    let o = hpa("ns", "h", Some("cache"));
    index.apply(Kind::Hpa, &o);
    index.apply(Kind::Hpa, &o);
    assert_eq!(index.len(Kind::Hpa), 1);
    assert_eq!(names(&index, "ns", "cache"), [(Kind::Hpa, "h".into())]);
}

#[test]
fn deployments_are_apps_deployments() {
    assert!(is_deployment("apps/v1", "Deployment"));
    assert!(is_deployment("apps/v1beta1", "Deployment"));
    assert!(!is_deployment("apps/v1", "StatefulSet"));
    assert!(!is_deployment("extensions.example.com/v1", "Deployment"));
    assert!(!is_deployment("v1", "Deployment"));
    assert!(!is_deployment("", "Deployment"));
}
