// trainyard data synth-yt8m | synth-shapes | inspect | convert-mnist | convert-images |
// convert-voc | convert-coco
#include <iostream>

#include "commands.h"
#include "convert_coco.h"
#include "convert_voc.h"
#include "data_tools.h"
#include "synth_shapes.h"
#include "trainyard/error.h"

namespace po = boost::program_options;

namespace trainyard::app {
namespace {

// Stores `args` into the options' variables. Returns false, having printed the options, when
// --help was given: the command has nothing more to do.
bool parse_flags(const std::vector<std::string>& args, const po::options_description& options,
                 const po::positional_options_description* positional = nullptr) {
  po::command_line_parser parser(args);
  parser.options(options);
  if (positional != nullptr) parser.positional(*positional);
  po::variables_map vm;
  po::store(parser.run(), vm);
  if (vm.count("help")) {
    std::cout << options << "\n";
    return false;
  }
  po::notify(vm);
  return true;
}

std::vector<int64_t> parse_sizes(const std::string& text) {
  std::vector<int64_t> sizes;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t comma = text.find(',', start);
    std::string part = text.substr(start, comma - start);
    try {
      std::size_t used = 0;
      long long v = std::stoll(part, &used);
      if (used != part.size() || v <= 0) throw std::invalid_argument(part);
      sizes.push_back(v);
    } catch (const std::exception&) {
      throw InvalidArgument("--feature_sizes: cannot read '" + part + "' as a positive integer");
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return sizes;
}

int synth(const std::vector<std::string>& args) {
  SynthYt8mOptions o;
  std::string sizes = "1024,128";
  po::options_description options("trainyard data synth-yt8m");
  options.add_options()("help,h", "this help")("output_dir", po::value(&o.output_dir)->required(),
                                               "directory for the TFRecord shards")(
      "num_videos", po::value(&o.num_videos)->default_value(1000),
      "training videos (validation gets a fifth as many)")(
      "num_classes", po::value(&o.num_classes)->default_value(3862), "label vocabulary size")(
      "frame_level", po::bool_switch(&o.frame_level), "write frame-level SequenceExamples")(
      "num_shards", po::value(&o.num_shards)->default_value(4), "files per split")(
      "seed", po::value(&o.seed)->default_value(0), "random seed")(
      "feature_sizes", po::value(&sizes)->default_value(sizes), "rgb,audio feature sizes")(
      "min_frames", po::value(&o.min_frames)->default_value(30), "frame level: fewest frames")(
      "max_frames", po::value(&o.max_frames)->default_value(120), "frame level: most frames");
  if (!parse_flags(args, options)) return 0;
  o.feature_sizes = parse_sizes(sizes);
  SynthYt8mSummary s = synth_yt8m(o);
  std::cout << "wrote " << s.train_videos << " training and " << s.validate_videos
            << " validation videos (" << (o.frame_level ? "frame" : "video") << " level, "
            << o.num_classes << " classes, " << s.mean_labels_per_video << " labels per video) in "
            << s.files.size() << " files under " << o.output_dir << "\n";
  return 0;
}

int inspect(const std::vector<std::string>& args) {
  std::string pattern;
  int64_t show = 1;
  po::options_description options("trainyard data inspect PATTERN");
  options.add_options()("help,h", "this help")("pattern", po::value(&pattern)->required(),
                                               "comma-separated globs of TFRecord files")(
      "show", po::value(&show)->default_value(1), "print the features of the first N records");
  po::positional_options_description positional;
  positional.add("pattern", 1);
  if (!parse_flags(args, options, &positional)) return 0;
  InspectSummary s = inspect_records(pattern, show, std::cout);
  return s.corrupt == 0 ? 0 : 1;
}

int mnist(const std::vector<std::string>& args) {
  std::string images, labels, output;
  po::options_description options("trainyard data convert-mnist");
  options.add_options()("help,h", "this help")("images", po::value(&images)->required(),
                                               "idx3 images (plain or .gz)")(
      "labels", po::value(&labels)->required(), "idx1 labels (plain or .gz)")(
      "output", po::value(&output)->required(), "TFRecord file to write");
  if (!parse_flags(args, options)) return 0;
  int64_t n = convert_mnist(images, labels, output);
  std::cout << "wrote " << n << " image Examples to " << output << "\n";
  return 0;
}

int images(const std::vector<std::string>& args) {
  ConvertImagesOptions o;
  po::options_description options("trainyard data convert-images");
  options.add_options()("help,h", "this help")(
      "image_dir", po::value(&o.image_dir)->required(),
      "directory with one subdirectory of JPEG or PNG images per class (sorted names give "
      "labels 0..K-1)")("output", po::value(&o.output)->required(),
                        "prefix of the files: PREFIX_train_00000-of-00005.tfrecord ..., and "
                        "labels.txt beside them")(
      "validation_fraction", po::value(&o.validation_fraction)->default_value(0.1, "0.1"),
      "share of the images (after shuffling) written to the validation split")(
      "num_shards", po::value(&o.num_shards)->default_value(5), "files per split")(
      "seed", po::value(&o.seed)->default_value(0), "seed of the shuffle");
  if (!parse_flags(args, options)) return 0;
  ConvertImagesSummary s = convert_images(o);
  std::cout << "wrote " << s.train_images << " training and " << s.validation_images
            << " validation images of " << s.class_names.size() << " classes:\n";
  for (const std::string& file : s.files) std::cout << "  " << file << "\n";
  return 0;
}

int shapes(const std::vector<std::string>& args) {
  SynthShapesOptions o;
  po::options_description options("trainyard data synth-shapes");
  options.add_options()("help,h", "this help")(
      "output_dir", po::value(&o.output_dir)->required(),
      "directory for train-*.tfrecord, val-*.tfrecord and label_map.pbtxt")(
      "num_images", po::value(&o.num_images)->default_value(1000), "training images")(
      "num_val_images", po::value(&o.num_val_images)->default_value(-1),
      "validation images (-1: val_fraction x num_images, at least 1)")(
      "val_fraction", po::value(&o.val_fraction)->default_value(0.1, "0.1"),
      "validation images per training image, when --num_val_images is -1")(
      "image_size", po::value(&o.image_size)->default_value(256), "height and width in pixels")(
      "max_image_size", po::value(&o.max_image_size)->default_value(0),
      "when above --image_size, each image's height and width are drawn in [image_size, "
      "max_image_size] (0: every image image_size square)")(
      "num_shards", po::value(&o.num_shards)->default_value(4), "training files")(
      "seed", po::value(&o.seed)->default_value(0), "random seed")(
      "min_shapes", po::value(&o.min_shapes)->default_value(1), "fewest shapes per image")(
      "max_shapes", po::value(&o.max_shapes)->default_value(6), "most shapes per image")(
      "jpeg_quality", po::value(&o.jpeg_quality)->default_value(90), "JPEG quality, 1 to 100")(
      "masks", po::bool_switch(&o.masks),
      "also write each object's instance mask as a PNG (image/object/mask)");
  if (!parse_flags(args, options)) return 0;
  SynthShapesSummary s = synth_shapes(o);
  std::cout << "wrote " << s.train_images << " training and " << s.val_images
            << " validation images with " << s.boxes << " boxes (" << s.cut_by_border
            << " cut by the border) of " << kSynthShapeClasses.size() << " classes";
  if (o.masks) {
    std::cout << "; " << s.hidden_shapes
              << " shapes painted over whole by later ones left unlabelled (empty masks)";
  }
  std::cout << ":\n";
  for (const std::string& file : s.files) std::cout << "  " << file << "\n";
  return 0;
}

int voc(const std::vector<std::string>& args) {
  ConvertVocOptions o;
  po::options_description options("trainyard data convert-voc");
  options.add_options()("help,h", "this help")(
      "data_dir", po::value(&o.data_dir)->required(),
      "the VOCdevkit directory (holding VOC2007/, VOC2012/)")(
      "year", po::value(&o.year)->default_value(o.year), "VOC2007, VOC2012 or merged (both)")(
      "set", po::value(&o.set)->default_value(o.set),
      "train, val, trainval or test: the ids of ImageSets/Main/aeroplane_<set>.txt")(
      "annotations_dir", po::value(&o.annotations_dir)->default_value(o.annotations_dir),
      "annotation directory, relative to <data_dir>/<year>")(
      "label_map_path", po::value(&o.label_map_path)->required(),
      "StringIntLabelMap text file: class names (item name) to labels")(
      "output", po::value(&o.output)->required(),
      "TFRecord file to write (with --num_shards above 1: OUTPUT-00000-of-0000N ...)")(
      "ignore_difficult_instances", po::bool_switch(&o.ignore_difficult_instances),
      "leave out objects marked difficult")("num_shards",
                                            po::value(&o.num_shards)->default_value(o.num_shards),
                                            "files to spread the records over, round robin");
  if (!parse_flags(args, options)) return 0;
  const ConvertVocSummary s = convert_voc(o);
  std::cout << "wrote " << s.images << " images with " << s.objects << " objects";
  if (o.ignore_difficult_instances)
    std::cout << " (" << s.difficult_ignored << " difficult left out)";
  std::cout << ":\n";
  for (const std::string& file : s.files) std::cout << "  " << file << "\n";
  return 0;
}

int coco(const std::vector<std::string>& args) {
  ConvertCocoOptions o;
  po::options_description options("trainyard data convert-coco");
  options.add_options()("help,h", "this help")("image_dir", po::value(&o.image_dir)->required(),
                                               "directory of the images' file_name")(
      "annotations", po::value(&o.annotations)->required(), "COCO instances JSON file")(
      "output", po::value(&o.output)->required(), "prefix of the files: OUTPUT-00000-of-0000N ...")(
      "label_map_path", po::value(&o.label_map_path)->default_value(""),
      "StringIntLabelMap text file: image/object/class/label is the id of the item whose name "
      "or display_name is the category's name; without, the COCO category id")(
      "num_shards", po::value(&o.num_shards)->default_value(o.num_shards),
      "files to spread the records over, round robin")(
      "drop_images_without_boxes", po::bool_switch(&o.drop_images_without_boxes),
      "write no record for an image left without boxes (by default it is written, as the API "
      "does)")("include_masks", po::bool_switch(&o.include_masks),
               "also write each object's segmentation (polygons or RLE) as a PNG mask, "
               "image/object/mask, as create_coco_tf_record.py --include_masks does");
  if (!parse_flags(args, options)) return 0;
  const ConvertCocoSummary s = convert_coco(o);
  std::cout << "wrote " << s.images << " images with " << s.boxes
            << (o.include_masks ? " boxes and masks (" : " boxes (") << s.crowd_boxes << " crowd); "
            << s.images_without_boxes << " images without boxes ("
            << (o.drop_images_without_boxes ? "dropped" : "written") << "); "
            << s.skipped_annotations << " annotations skipped (empty box, or not inside the image)";
  if (s.annotations_without_image > 0) {
    std::cout << "; " << s.annotations_without_image
              << " annotations of image ids that \"images\" does not list, not written";
  }
  std::cout << ":\n";
  for (const std::string& file : s.files) std::cout << "  " << file << "\n";
  return 0;
}

}  // namespace

const char* data_tools_help() {
  return "  data synth-yt8m --output_dir D --num_videos N --num_classes K [--frame_level]\n"
         "                               write a learnable YouTube-8M-format dataset\n"
         "  data inspect PATTERN [--show N]  count records, check CRCs, print features\n"
         "  data convert-mnist --images F --labels F --output F\n"
         "                               idx files to TFRecord image Examples\n"
         "  data convert-voc --data_dir VOCdevkit --year VOC2007 --set train\n"
         "                   --label_map_path F --output F\n"
         "                               PASCAL VOC to Object Detection API tf.Examples\n"
         "  data convert-coco --image_dir D --annotations instances.json --output P\n"
         "                               COCO instances to Object Detection API tf.Examples\n"
         "  coco-eval GROUNDTRUTH.json DETECTIONS.json\n"
         "                               pycocotools' COCOeval of bounding boxes (12 figures)\n\n";
}

int run_data(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::cout << "trainyard data synth-yt8m | synth-shapes | inspect PATTERN | convert-mnist | "
                 "convert-images | convert-voc | convert-coco (--help on each)\n";
    return args.empty() ? 2 : 0;
  }
  std::vector<std::string> rest(args.begin() + 1, args.end());
  if (args[0] == "synth-yt8m") return synth(rest);
  if (args[0] == "synth-shapes") return shapes(rest);
  if (args[0] == "inspect") return inspect(rest);
  if (args[0] == "convert-mnist") return mnist(rest);
  if (args[0] == "convert-images") return images(rest);
  if (args[0] == "convert-voc") return voc(rest);
  if (args[0] == "convert-coco") return coco(rest);
  throw InvalidArgument("unknown data action '" + args[0] +
                        "'; use synth-yt8m, synth-shapes, inspect, convert-mnist, "
                        "convert-images, convert-voc or convert-coco");
}

}  // namespace trainyard::app
