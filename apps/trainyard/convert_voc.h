// `trainyard data convert-voc`: PASCAL VOC as the Object Detection API's
// dataset_tools/create_pascal_tf_record.py converts it.
//
// The layout read (VOCdevkit as the challenge ships it):
//   <data_dir>/<year>/ImageSets/Main/aeroplane_<set>.txt   the ids of the set: the first word
//                                                           of each line ("000005 -1")
//   <data_dir>/<year>/<annotations_dir>/<id>.xml           the annotation of each id
//   <data_dir>/<folder>/JPEGImages/<filename>              the image, <folder> and <filename>
//                                                           taken from the annotation
// year VOC2007 or VOC2012, or merged (VOC2007's ids, then VOC2012's); set train, val, trainval
// or test.
//
// One tf.Example per id, in list order, with dict_to_tf_example's keys:
//   image/height, image/width        int64, the annotation's <size>
//   image/filename, image/source_id  bytes, the annotation's <filename>
//   image/key/sha256                 bytes, hex SHA-256 of the image file
//   image/encoded, image/format      the JPEG file's bytes, "jpeg"
//   image/object/bbox/{xmin,xmax,ymin,ymax}   float, <bndbox> divided by width or height (as
//                                    written: VOC's 1-based pixel coordinates are not shifted)
//   image/object/class/text          bytes, <name>
//   image/object/class/label         int64, <name>'s id in the label map (by item name)
//   image/object/difficult, truncated   int64, <difficult> (0 or 1), <truncated>
//   image/object/view                bytes, <pose>
// Objects are in document order; with ignore_difficult_instances the difficult ones are left out
// (and counted). Ids with no objects still give a record, with empty object lists.
//
// Stricter than the script, which would stop with a KeyError or write a wrong record: every
// element read must be present once (object's name, pose, truncated, difficult, bndbox and its
// four coordinates; folder, filename, size/width, size/height), numbers must read whole (an
// integer for width, height, difficult and truncated; a finite number for the coordinates),
// width and height must be positive and equal the JPEG's own, and a class the label map lacks
// is an error naming it. Blank lines of a set file are not ids. Other elements (source, owner,
// segmented, part, actions, attributes) are not read.
//
// Errors name the file and the element ("VOC2007/Annotations/000001.xml: annotation/object[2]/
// bndbox/xmin: ..."), or the file and line for XML that does not parse; DataLoss for a file
// that is not what it should be, NotFound for a missing file, InvalidArgument for options and
// unknown classes. Nothing is written unless every record converts (record_shards.h).
#ifndef TRAINYARD_APPS_TRAINYARD_CONVERT_VOC_H_
#define TRAINYARD_APPS_TRAINYARD_CONVERT_VOC_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace trainyard::app {

// An annotation file larger than this is not a VOC annotation (VOC's are a few KB).
inline constexpr uint64_t kMaxVocAnnotationBytes = uint64_t{4} << 20;

struct VocObject {
  std::string name;
  std::string pose;
  int64_t truncated = 0;
  bool difficult = false;
  double xmin = 0, ymin = 0, xmax = 0, ymax = 0;  // pixels, as written
};

struct VocAnnotation {
  std::string folder;
  std::string filename;
  int64_t width = 0;
  int64_t height = 0;
  std::vector<VocObject> objects;  // in document order
};

// Parses one annotation file's text; `source` names it in errors. Throws DataLoss as above.
VocAnnotation parse_voc_annotation(std::string_view xml, const std::string& source);

struct ConvertVocOptions {
  std::string data_dir;  // VOCdevkit
  std::string year = "VOC2007";
  std::string set = "train";
  std::string annotations_dir = "Annotations";  // relative to <data_dir>/<year>
  std::string label_map_path;
  std::string output;
  bool ignore_difficult_instances = false;
  // 1: one file named `output`, as the script writes; more: record_shards.h's names.
  int num_shards = 1;
};

struct ConvertVocSummary {
  int64_t images = 0;
  int64_t objects = 0;            // written
  int64_t difficult_ignored = 0;  // left out by ignore_difficult_instances
  std::vector<std::string> files;
};

ConvertVocSummary convert_voc(const ConvertVocOptions& options);

}  // namespace trainyard::app

#endif  // TRAINYARD_APPS_TRAINYARD_CONVERT_VOC_H_
