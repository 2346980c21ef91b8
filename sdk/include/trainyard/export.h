// Symbol visibility for the Trainyard SDK.
//
// libtrainyard_core and every plugin are compiled with -fvisibility=hidden. Classes and
// functions that plugins and the host share are marked TRAINYARD_API so that their vtables,
// type_info and out-of-line members are emitted once, in libtrainyard_core, and resolved by
// the dynamic linker everywhere else. dynamic_cast and catching trainyard::Error across the
// plugin boundary rely on that uniqueness.
#ifndef TRAINYARD_EXPORT_H_
#define TRAINYARD_EXPORT_H_

#define TRAINYARD_API __attribute__((visibility("default")))

#endif  // TRAINYARD_EXPORT_H_
